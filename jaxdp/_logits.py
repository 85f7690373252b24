"""Scores to logits: the one transform every finite-range sampler uses.

A sampler's logits are ``(s_r - m) * c`` per row: the scores ``s``, shifted by
the row maximum ``m`` (so offsets such as 1e30 or 2**24 do not move the law)
and scaled by ``c = epsilon / (2 * sensitivity)`` (``/ sensitivity`` when
monotonic, :func:`scale_factor`). :func:`from_scores` computes that once and
returns it as :class:`Logits`: the three factors, *not* the product. Every
kernel takes one ``Logits`` and computes its weights or race rates from the
factors exactly (:func:`jaxdp._descent.weights`,
:func:`jaxdp._noisy_kernels.race_rates`): a float32 product ``fl(fl(s - m) c)``
is off by up to ``2u |logit|``, which alone would spend the finite-precision
budget. The factors also let XLA fuse the whole transform into the kernel's
pass over the scores, so the ``(B, n)`` logits are never written to memory
(:meth:`Logits.values` materialises them, for the log-probabilities).

Log-weights that a mechanism built itself (joint quantiles, joint top-k, the
continuous mechanisms' interval masses) are shifted by :func:`shift_log_weights`
and drawn through :func:`jaxdp._sampling.categorical`.

CPU notes. On CPU, XLA reduces fast only inside its YNNPACK fusions, which
take ``exp``, ``+``, ``-``, ``*``, reductions and strided ``reduce_window`` but
not selects or compares; a select between a large producer and its reduction,
or a second reader of a large fused producer, makes XLA materialise a
``(B, n)`` temporary, and fresh large buffers cost ~3 ms per 10**7 floats in
page faults. The transform is select-free for that reason.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import _tuning
from ._checks import compute_dtype
from ._rows import broadcast_batch
from ._twofloat import two_sum
from ._typing import Array


def scale_factor(epsilon: Array, sensitivity: Array, monotonic: bool, dtype) -> Array:
    """epsilon / (2 * sensitivity), or epsilon / sensitivity when monotonic."""
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    denom = sensitivity if monotonic else 2 * sensitivity
    return epsilon / denom


def clip_scale(scale: Array) -> Array:
    """The scale clamped into the normal float range, so that ``0 * scale`` and
    ``-inf * scale`` are never NaN: a scale that overflowed to ``inf`` acts as the
    largest float (any score below the maximum gets a logit of about ``-inf``), one
    that underflowed to 0 as the smallest normal float (all finite logits about 0),
    which is what the true, unrepresentable scale does too."""
    scale = jnp.asarray(scale)
    info = jnp.finfo(scale.dtype)
    return jnp.clip(scale, info.tiny, info.max)


def params_valid(batch: tuple[int, ...], *params: Array) -> Array:
    """Boolean ``batch``-shaped mask: every privacy parameter is finite and > 0."""
    ok = jnp.ones(batch, bool)
    for p in params:
        ok = ok & jnp.broadcast_to(jnp.isfinite(p) & (p > 0), batch)
    return ok


def row_valid(row_max: Array, *params: Array) -> Array:
    """Boolean mask: the row has a finite score, no NaN/+inf, and every privacy
    parameter is finite and > 0 (shape: ``row_max``'s broadcast with the
    parameters'). Rows that fail give -1.

    A row is valid exactly when its maximum is finite: NaN propagates through
    ``max``, ``+inf`` dominates it, and an all ``-inf`` row has maximum ``-inf``.
    """
    ok = jnp.isfinite(row_max)
    batch = broadcast_batch(ok.shape, *(jnp.shape(p) for p in params))
    return jnp.broadcast_to(ok, batch) & params_valid(batch, *params)


def _widen(scores: Array) -> Array:
    """Integers narrower than 32 bits as int32 (the gaps below fit their unsigned type)."""
    return scores.astype(jnp.int32) if scores.dtype.itemsize < 4 else scores


def _gap(row_max: Array, scores: Array) -> Array:
    """``row_max - scores`` (integers, ``row_max`` the row's maximum) exactly, in the
    unsigned type of the same width: it always fits, and two's-complement
    subtraction computes it exactly modulo 2**bits."""
    unsigned = jnp.dtype(f"uint{8 * scores.dtype.itemsize}")
    bits = jax.lax.bitcast_convert_type
    return bits(row_max.astype(scores.dtype), unsigned) - bits(scores, unsigned)


def difference(scores: Array, row_max: Array) -> tuple[Array, Array]:
    """``scores - row_max`` as a two-float pair ``(hi, lo)`` of the compute dtype.

    Float scores: TwoSum, exact (``hi + lo`` is the real difference). Integer scores
    and an integer ``row_max`` (the row's maximum, broadcasting against them): the
    exact integer gap rounded once, ``lo = 0``. Gaps below 2**24 (2**53 in float64)
    convert exactly; larger ones round, but such outcomes have selection
    probability e**-(ε 2**24 / 2Δ), i.e. 0. So counts above 2**24 keep their exact
    differences to the row maximum (a gap of 1 between 16777217 and 16777216
    stays 1), and inside a jitted kernel XLA fuses the integer shift and the
    conversion into the pass that consumes them.
    """
    if jnp.issubdtype(scores.dtype, jnp.integer):
        scores = _widen(scores)
        hi = -_gap(row_max, scores).astype(compute_dtype())
        return hi, jnp.zeros_like(hi)
    return two_sum(scores, -row_max)


def no_gradient(tree):
    """``tree`` (arrays, or a :class:`Logits`) with every leaf behind
    ``lax.stop_gradient``: what the samplers do to their inputs before drawing an
    index. The index is an integer and carries no gradient (its law's parameters
    would need a score-function estimator, not a pathwise one), and the kernels'
    exact reductions (a double-float variadic ``reduce``, ``reduce_window``) have no
    JVP rule, so without this ``jax.grad`` of a loss that uses a drawn index would
    fail inside them; with it the loss's own use of the scores is differentiated,
    as with ``jax.random.categorical``."""
    return jax.tree_util.tree_map(jax.lax.stop_gradient, tree)


def row_max(scores: Array) -> Array:
    """Each row's maximum, ``(...,)`` for scores ``(..., n)``: ``jnp.max``, except for
    integer scores where :data:`jaxdp._tuning.STRIDED_INT_ROW_MAX` says otherwise:
    then the elementwise maximum of the ``8`` strided slices of the rows (and of
    the last ``n mod 8`` entries), then the maximum of that. The same value either
    way (a maximum is exact in any order)."""
    n = scores.shape[-1]
    main = n - n % 8
    if not (jnp.issubdtype(scores.dtype, jnp.integer) and main and _tuning.strided_int_row_max()):
        return jnp.max(scores, axis=-1)
    lanes = functools.reduce(jnp.maximum, [scores[..., j:main:8] for j in range(8)])
    top = jnp.max(lanes, axis=-1)
    return top if main == n else jnp.maximum(top, jnp.max(scores[..., main:], axis=-1))


def integer_gaps(scores: Array) -> Array:
    """Integer scores ``(..., n)`` as floats ``-(row max - s)`` (:func:`difference`):
    exact below 2**24, and each row's maximum exactly 0 (``-0.0``)."""
    scores = _widen(scores)
    return difference(scores, row_max(scores)[..., None])[0]


def float_scores(scores: Array) -> Array:
    """Scores of the compute dtype: integers by :func:`integer_gaps` (exact), floats as given."""
    return integer_gaps(scores) if jnp.issubdtype(scores.dtype, jnp.integer) else scores


class Logits(NamedTuple):
    """The logits ``(scores - row_max) * scale`` of a batch of rows, as their factors.

    ``scores`` is ``(..., n)``, of the compute dtype (``-inf``: never selected) or
    of an integer dtype; ``row_max`` (each row's maximum score, of the scores'
    dtype) and ``scale`` (of the compute dtype) have the batch shape (the scores'
    batch broadcast with the scale's shape). ``scale`` is finite, normal and > 0
    (:func:`clip_scale`); a row whose ``row_max`` is not finite (NaN, ``+inf`` or
    all ``-inf``) is invalid, and every caller masks it. Kernels take the
    difference ``scores - row_max`` from :func:`difference` (exact for both kinds);
    the ones that need float scores call :meth:`as_float`.
    """

    scores: Array
    row_max: Array
    scale: Array

    @property
    def batch(self) -> tuple[int, ...]:
        return tuple(self.row_max.shape)

    @property
    def n(self) -> int:
        return self.scores.shape[-1]

    def as_float(self) -> Logits:
        """The same logits with float scores: integer scores become their exact
        gaps to the row maximum (:func:`integer_gaps`), whose maximum is 0."""
        if not jnp.issubdtype(self.scores.dtype, jnp.integer):
            return self
        gaps = integer_gaps(self.scores)
        return Logits(gaps, jnp.full(self.batch, -0.0, gaps.dtype), self.scale)

    def values(self) -> Array:
        """The logits, materialised, of shape ``batch + (n,)``.

        One subtraction and one multiplication, no select: each row's maximum
        becomes exactly 0, ``-inf`` scores stay ``-inf``, and no NaN comes out of
        a valid row even when the scale over- or underflowed (:func:`clip_scale`).
        """
        scores, row_max, scale = self.as_float()
        scores = jnp.broadcast_to(scores, self.batch + (self.n,))
        return (scores - row_max[..., None]) * scale[..., None]


def from_scores(scores: Array, scale: Array) -> Logits:
    """The :class:`Logits` of ``scores`` ``(..., n)`` (float of the compute dtype,
    or integer) at ``scale`` (broadcasting against the batch shape
    ``scores.shape[:-1]``).

    The row maximum is left as it is (no select on it), so that XLA can fuse it
    into the pass that consumes the logits. Integer scores stay integer (their
    row maximum too): the kernels take their exact differences (:func:`difference`)
    inside their own pass, so no float copy of the scores is written.
    """
    if jnp.issubdtype(scores.dtype, jnp.integer):
        scores = _widen(scores)
    batch = broadcast_batch(scores.shape[:-1], jnp.shape(scale))
    top = row_max(scores)
    row_scale = clip_scale(jnp.asarray(scale, compute_dtype()))
    return Logits(scores, jnp.broadcast_to(top, batch), jnp.broadcast_to(row_scale, batch))


def shift_log_weights(log_weights: Array) -> tuple[Array, Array]:
    """``(logits, ok)``: log-weights ``(..., n)`` shifted so that each valid row's
    maximum is 0, and the batch-shaped flag that the row's maximum is finite (a
    row with a NaN, a ``+inf`` or no finite entry is invalid; it is left
    unshifted, and the caller masks it)."""
    row_max = jnp.max(log_weights, axis=-1, keepdims=True)
    ok = jnp.isfinite(row_max[..., 0])
    return log_weights - jnp.where(ok[..., None], row_max, 0), ok
