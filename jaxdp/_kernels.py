"""Vectorised sampling kernels shared by the finite-range mechanisms.

Everything here works on *logits*: ``(..., n)`` arrays, already scaled by
epsilon / (2 * sensitivity) and shifted so each row's maximum is 0. Public
functions validate, canonicalise and then call these under ``jax.jit``.

Two ways to draw selections, each in its own module:

* :func:`jaxdp._noisy_kernels.noisy_argmax`: the race ``argmin X_i / w_i`` (Gumbel:
  the exponential mechanism; Laplace and exponential noise: report-noisy-max),
  in cache-sized chunks.
* :func:`inverse_cdf` (here): the sound categorical kernel of
  :mod:`jaxdp._descent` (weights exact to a few ulp, then for few draws per row
  double-float block sums and a sorted per-level descent, for many an alias table
  of :mod:`jaxdp._alias`; :mod:`jaxdp._tuning` chooses); its law and
  finite-precision guarantee are in
  ``SECURITY.md`` ("The categorical kernel"). This module computes the rows'
  weights from the scores and hands them over.

Random numbers. Every variate comes from :mod:`jaxdp._random` (the hardened
generators). Before sampling, a threefry key is re-wrapped by
:func:`fast_key` into an implementation that computes *the same threefry2x32
bits* (verified bit for bit against :func:`jax.random.bits` by the tests), but
unrolled, so that XLA fuses the hash with the arithmetic that consumes it.
JAX lowers threefry on CPU as a rolled loop over full-size arrays, which
costs 2x (in cache) to 6x (16M values) in throughput. Keys of other
implementations (``rbg``, ``unsafe_rbg``, custom) are used as given.

CPU notes. On CPU, XLA reduces fast only inside its YNNPACK fusions, which
take ``exp``, ``+``, ``-``, ``*``, reductions and strided ``reduce_window`` but
not selects or compares; a select between a large producer and its reduction,
or a second reader of a large fused producer, makes XLA materialise a
``(B, n)`` temporary, and fresh large buffers cost ~3 ms per 10**7 floats in
page faults. The logits here are select-free for that reason. The descent
(:mod:`jaxdp._descent`) has CPU notes of its own: block sums are one variadic
reduction, and each level gathers its 16 lanes in one gather (many small
gathers get fused into, and recomputed in, every consumer).

PRNG choice (not made for the user). ``jax.random.key(seed, impl="rbg")`` or
``"unsafe_rbg"`` keys are accepted by every sampler and are cheaper on GPU
(XLA's RngBitGenerator, Philox). For a privacy library the trade-off is: the
noise's only job is to be unpredictable and independent; threefry2x32 is a
counter-based generator with a published cryptanalysis margin (Salmon et al.
2011), its streams are identical on every backend and under every sharding,
and ``split``/``fold_in`` derive independent keys; ``rbg`` keeps threefry for
splitting but generates bits with RngBitGenerator, whose streams may change
across backends and XLA versions (reproducibility of a release is lost), and
``unsafe_rbg`` also splits with it, which has no stated independence
guarantee for derived keys. None of them is a cryptographically secure
generator; a deployment that must resist an adversary who could predict the
noise should seed from OS entropy (``jaxdp.random_key``) and keep the key
secret. jaxdp therefore keeps threefry as the default and leaves the faster
implementations as an explicit user choice; ``python -m benchmarks`` reports
what they buy.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import define_prng_impl, threefry_prng_impl

from . import _descent
from ._typing import Array, PRNGKey

# ----------------------------------------------------------------------------- fused threefry


def _rotl(x: Array, d: int) -> Array:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def _threefry2x32(k1: Array, k2: Array, x1: Array, x2: Array) -> tuple[Array, Array]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), unrolled elementwise ops."""
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    a, b = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in rotations[i % 2]:
            a = a + b
            b = _rotl(b, r) ^ a
        a = a + ks[(i + 1) % 3]
        b = b + ks[(i + 2) % 3] + np.uint32(i + 1)
    return a, b


_UINT = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}


def _fused_threefry_bits(key: Array, bit_width: int, shape: tuple[int, ...]) -> Array:
    """``jax.random.bits`` of a threefry key, bit for bit, as one fusable expression.

    Reproduces JAX's partitionable threefry stream: element ``i`` (row-major)
    hashes the 64-bit counter ``i`` as ``(hi, lo)`` words. Falls back to JAX's
    own implementation when that stream is not the active one or when the
    counter does not fit in 32 bits.
    """
    size = math.prod(shape)
    if not jax.config.jax_threefry_partitionable or size >= 2**32:
        return threefry_prng_impl.random_bits(key, bit_width, shape)
    lo = jax.lax.broadcasted_iota(jnp.uint32, (size,), 0).reshape(shape)
    b1, b2 = _threefry2x32(key[0], key[1], jnp.zeros_like(lo), lo)
    if bit_width == 64:
        return (b1.astype(jnp.uint64) << np.uint64(32)) | b2.astype(jnp.uint64)
    out = b1 ^ b2
    return out if bit_width == 32 else out.astype(_UINT[bit_width])


_FUSED_THREEFRY = define_prng_impl(
    key_shape=threefry_prng_impl.key_shape,
    seed=threefry_prng_impl.seed,
    split=threefry_prng_impl.split,
    random_bits=_fused_threefry_bits,
    fold_in=threefry_prng_impl.fold_in,
    name="threefry2x32_fused",
    tag="fryf",
)


def fused_threefry(key: PRNGKey) -> PRNGKey:
    """``key`` re-wrapped as a threefry key with the fusable lowering (same bits).

    Does not consume ``key`` for JAX's key-reuse checker; use :func:`fast_key`.
    """
    return jax.random.wrap_key_data(jax.random.key_data(key), impl=_FUSED_THREEFRY)


def fast_key(key: PRNGKey) -> PRNGKey:
    """A fresh key derived from ``key``, generating bits through a fusable lowering.

    A threefry2x32 key is re-wrapped by :func:`fused_threefry`: the same
    stream (bit for bit), hence the same law and the same draws, with a faster
    lowering; ``key`` itself is marked as consumed for JAX's key-reuse
    checker. Keys of other
    implementations are returned as they are.
    """
    if jax.random.key_impl(key) != "threefry2x32":
        return key
    # An empty draw marks `key` as used for JAX's key-reuse checker; the new
    # key then carries the same stream, consumed once by the caller.
    jax.random.bits(key, (0,))
    return fused_threefry(key)


# ----------------------------------------------------------------------------- logits


def broadcast_batch(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(jnp.broadcast_shapes(*shapes))


def scale_factor(epsilon: Array, sensitivity: Array, monotonic: bool, dtype) -> Array:
    """epsilon / (2 * sensitivity), or epsilon / sensitivity when monotonic."""
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    denom = sensitivity if monotonic else 2 * sensitivity
    return epsilon / denom


def _logit_params(scores: Array, scale: Array) -> tuple[tuple[int, ...], Array, Array]:
    """(batch, row max, row scale), the per-row quantities of :func:`to_logits`.

    A row whose maximum is not finite (NaN, ``+inf`` or all ``-inf``) is
    invalid: its logits are NaN, and every caller masks it. The maximum is
    left as it is (no select on it), so that XLA can fuse it into the pass
    that consumes the logits. The scale is clamped into the normal
    float range, so that ``0 * scale`` and ``-inf * scale`` are never NaN: a
    scale that overflowed to ``inf`` acts as the largest float (any score below
    the maximum gets a logit of about ``-inf``), one that underflowed to 0 as
    the smallest normal float (all finite logits about 0), which is what the
    true, unrepresentable scale does too.
    """
    batch = broadcast_batch(scores.shape[:-1], jnp.shape(scale))
    info = jnp.finfo(scores.dtype)
    row_max = jnp.max(scores, axis=-1)
    row_scale = jnp.clip(jnp.asarray(scale, scores.dtype), info.tiny, info.max)
    return batch, jnp.broadcast_to(row_max, batch), jnp.broadcast_to(row_scale, batch)


def to_logits(scores: Array, scale: Array) -> Array:
    """Scaled, max-shifted logits, broadcast to ``broadcast(batch, scale) + (n,)``.

    ``scores`` is ``(..., n)``; ``scale`` broadcasts against the batch shape
    ``scores.shape[:-1]``. Each row's maximum becomes exactly 0, so large
    offsets (1e30, 2**24 and above) do not move the law; ``-inf`` scores stay
    ``-inf``; no NaN comes out of finite inputs even when ``scale`` over- or
    underflows (see :func:`_logit_params`).

    The full-size part is one subtraction and one multiplication, with no
    select: on CPU, XLA fuses it into the reduction that consumes it (a select
    there splits the fusion and materialises a ``(B, n)`` temporary, which
    costs ~3 ms per 10**7 floats in page faults alone).
    """
    batch, row_max, row_scale = _logit_params(scores, scale)
    n = scores.shape[-1]
    scores = jnp.broadcast_to(scores, batch + (n,))
    return (scores - row_max[..., None]) * row_scale[..., None]


def params_valid(batch: tuple[int, ...], *params: Array) -> Array:
    """Boolean ``batch``-shaped mask: every privacy parameter is finite and > 0."""
    ok = jnp.ones(batch, bool)
    for p in params:
        ok = ok & jnp.broadcast_to(jnp.isfinite(p) & (p > 0), batch)
    return ok


def row_valid(scores: Array, *params: Array) -> Array:
    """Boolean batch-shaped mask: the row has a finite score, no NaN/+inf, and
    every privacy parameter is finite and > 0. Rows that fail give -1.

    A row is valid exactly when its maximum is finite: NaN propagates through
    ``max``, ``+inf`` dominates it, and an all ``-inf`` row has maximum ``-inf``.
    """
    ok = jnp.isfinite(jnp.max(scores, axis=-1))
    batch = broadcast_batch(ok.shape, *(jnp.shape(p) for p in params))
    return jnp.broadcast_to(ok, batch) & params_valid(batch, *params)


def split_shape(shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(number of leading i.i.d. draws, tail batch shape) for a draw ``shape``."""
    lead = shape[: len(shape) - len(batch)]
    tail = shape[len(shape) - len(batch) :]
    return math.prod(lead), tuple(tail)


def flatten_rows(logits: Array, tail: tuple[int, ...]) -> Array:
    """Broadcast ``(*batch, n)`` logits to ``tail + (n,)`` and flatten to ``(B, n)``."""
    n = logits.shape[-1]
    logits = jnp.broadcast_to(logits, tail + (n,))
    return logits.reshape((math.prod(tail), n))


# ----------------------------------------------------------------------------- steps


def _even_chunks(total: int, most: int) -> tuple[int, int]:
    """(items per chunk, chunks) covering ``total`` items, at most ``most`` per
    chunk; a divisor of ``total`` when one is at least half of ``most`` (no
    padding, so the stacked result needs no trimming copy)."""
    most = max(1, min(most, total))
    for per in range(most, max(1, most // 2) - 1, -1):
        if total % per == 0:
            return per, total // per
    chunks = -(-total // most)
    return -(-total // chunks), chunks


def _map_steps(body: Callable[[PRNGKey, Array], Array], key: PRNGKey, num_steps: int) -> Array:
    """``stack([body(key_s, s) for s in range(num_steps)])`` as one ``lax.map``."""
    if num_steps == 1:
        return body(key, jnp.zeros((), jnp.int32))[None]
    keys = jax.random.split(key, num_steps)
    return jax.lax.map(lambda ks: body(ks[0], ks[1]), (keys, jnp.arange(num_steps)))


# ----------------------------------------------------------------------------- inverse CDF


def inverse_cdf(
    key: PRNGKey,
    logits: Array,
    shape: tuple[int, ...],
    scores: Array | None = None,
    scale: Array | None = None,
) -> tuple[Array, Array]:
    """Categorical draws of ``softmax(logits)`` by the sound descent (:mod:`jaxdp._descent`).

    Returns the draws (``shape``) and a batch-shaped flag that the row is valid
    (a positive, finite total: false for rows with a NaN, a ``+inf`` or no
    finite logit, which the callers mask).

    When the logits are ``to_logits(scores, scale)``, pass ``scores`` and
    ``scale`` instead: the weights are then computed from the scores by
    :func:`jaxdp._descent.weights` (exact to a few ulp at any logit, the scale
    rounded down), never from the rounded logits.
    """
    batch = logits.shape[:-1] if scores is None else _logit_params(scores, scale)[0]
    n = logits.shape[-1]
    num_lead, tail = split_shape(shape, batch)
    if math.prod(shape) == 0:  # no draws (e.g. scores of shape (0, n))
        return jnp.zeros(shape, jnp.int32), jnp.ones(tail, bool)
    if scores is None:
        rows = flatten_rows(logits, tail)
        row_max = jnp.max(rows, axis=-1)
        w = _descent.weights(rows, row_max, jnp.ones_like(row_max))
    else:
        _, row_max, row_scale = _logit_params(scores, scale)
        rows = flatten_rows(jnp.broadcast_to(scores, batch + (n,)), tail)
        row_max = jnp.broadcast_to(row_max, tail).reshape(-1)
        row_scale = jnp.broadcast_to(_descent.scale_down(row_scale), tail).reshape(-1)
        idx, ok = _descent.sample_scores(fast_key(key), rows, row_max, row_scale, num_lead)
        return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)
    idx, ok = _descent.sample(fast_key(key), w, num_lead)
    return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)


# ----------------------------------------------------------------------------- auto


def choose_method(num_draws_per_row: int, n: int, num_rows: int) -> str:
    """``method="auto"``'s choice for these static sizes: :func:`jaxdp._tuning.choose_method`."""
    from . import _tuning  # the rule and its constants live there

    return _tuning.choose_method(num_draws_per_row, n, num_rows)


def np_int(x) -> int:
    return int(np.asarray(x))
