"""Noisy argmax as an exponential race: argmin (or k smallest) of ``X_i * r_i``, in chunks.

Every noise-based selection path (the exponential mechanism's ``"gumbel"``
method, report-noisy-max with Laplace, Gumbel or exponential noise,
permute-and-flip and one-shot top-k) is written multiplicatively. With
logits ``l_i = c (s_i - max s) <= 0`` and rates ``r_i = exp(-l_i) >= 1``:

=================  ==========================  ===============================
noise              additive form               race form (same law)
=================  ==========================  ===============================
Gumbel             argmax l_i + G_i            argmin E_i r_i, E ~ Exp(1)
exponential (PF)   argmax l_i + Exp_i          argmin U_i r_i, U ~ U(0, 1)
Laplace            argmax l_i + L_i            argmin exp(-L_i) r_i
=================  ==========================  ===============================

(``G = -log E``, ``Exp = -log U``; ``exp`` is increasing.) Top-k peels: k rounds
of the race, each over the outcomes not yet chosen, with its own row maximum
and fresh noise (equal in law to the one-shot k smallest, by memorylessness;
k times the noise, but every round keeps the guarantee of one race).

The race form has
only *relative* rounding: no error that grows with ``|l_i|`` and no sum of a
logit and a noise value whose rounding depends on the data. The variates come
from 64 random bits (:func:`jaxdp._random.race_exponential`,
:func:`~jaxdp._random.uniform64`, :func:`~jaxdp._random.race_laplace`), so
the noise CDF is right to within ``2**-65`` absolute near 0.

The rates are computed to a few float32 roundings *relative*, from the scores
(:func:`race_rates`): ``max s - s_i`` as an exact two-float sum, its product
with the scale as an exact two-float product (12-bit splits by bit masks, so
it is exact whether or not the backend contracts to FMA), then
``exp(t_hi) * (1 + t_lo)``. The scale is rounded *down* by 2**-21 relative, so
the float32 scale never exceeds ``epsilon / (2 sensitivity)``. Logits are
clipped at ``-LOGIT_FLOOR`` (80) below the row maximum: the clipped
mechanism is exactly as private as the unclipped one (it is the same
mechanism on the utility ``max(s_i, max s - 80/c)``, which has the same
sensitivity and monotonicity), it keeps every rate finite, and it moves the
law by at most ``n e**-80`` in total variation.

The derivation of the resulting (epsilon', delta') is in SECURITY.md,
"Finite precision: noise-based paths".

At most a chunk of noise values (:data:`jaxdp._tuning.RACE_CHUNK`, per
backend) is live at a time: a step covers several draws of all rows, or a
block of rows of one draw, or (for rows longer than the chunk) one row whose
candidates are scanned block by block with a running minimum (for top-k: per
round, a pass for the round's row maximum, then the race). :func:`race_plan`
says which, and how many steps; the plan is staged per platform
(:func:`jaxdp._tuning.staged`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _logits, _random, _tracing, _tuning
from ._logits import Logits, clip_scale
from ._rows import even_chunks, map_steps, split_shape
from ._rows import largest_divisor as _largest_divisor
from ._threefry import fast_key
from ._twofloat import balance, two_prod, two_sum
from ._typing import Array, PRNGKey

#: Logits are clipped at this distance below the row maximum (logit units).
LOGIT_FLOOR = 80.0

#: The scale epsilon / (2 sensitivity) is multiplied by this before use, so
#: that its float32 value never exceeds the real one (3 roundings < 2**-21).
SCALE_ROUND_DOWN = 1.0 - 2.0**-21

#: The race variable X of each noise: ``argmin X_i * r_i``.
NOISES: dict[str, Callable] = {
    "gumbel": _random.race_exponential,
    "laplace": _random.race_laplace,
    "exponential": _random.uniform64,
}


def round_down_scale(scale: Array) -> Array:
    """float32 scale, finite, normal and rounded down: ``<=`` the real ``epsilon / (2 Delta)``."""
    scale = clip_scale(scale)
    return scale * scale.dtype.type(SCALE_ROUND_DOWN)


def race_rates(scores: Array, row_max: Array, scale: Array) -> Array:
    """``exp(min(scale * (row_max - scores), LOGIT_FLOOR))`` to a few roundings, relative.

    ``scores`` float32 ``(..., n)``; ``row_max`` and ``scale`` broadcast against
    it (``(..., 1)``); ``scale`` finite, normal and > 0 (see
    :func:`round_down_scale`). ``-inf`` scores give ``+inf`` (never selected).
    The result is ``exp(min(t, 80)) * exp(rho)`` with ``t`` the exact real
    product of the float32 inputs and ``|rho| <= (c_exp + 1.25) * 2**-24``,
    ``c_exp * 2**-24`` the relative error of the backend's float32 ``exp``.
    """
    f = scores.dtype.type
    never = scores == -jnp.inf
    # A -inf score races as row_max (rate 1), then gets rate +inf below: the TwoSum
    # never meets inf - inf, whose NaN checkify's nan_checks would report.
    live = jnp.where(never, row_max, scores)
    d_hi, d_lo = two_sum(row_max, -live)  # d_hi + d_lo == row_max - scores exactly
    infinite = d_hi == jnp.inf
    d_hi, d_lo, scale = balance(d_hi, d_lo, scale)  # no subnormal partial product
    # The product's error term is exact (halves of 12 bits); the remainder is ~2**-11
    # of t, so its roundings are negligible.
    t_hi, t_err = two_prod(d_hi, scale)
    t_lo = t_err + d_lo * scale
    floor = f(LOGIT_FLOOR)
    clipped = (t_hi > floor) | ((t_hi == floor) & (t_lo >= 0)) | infinite
    e = jnp.exp(jnp.minimum(t_hi, floor))
    rate = jnp.where(clipped, f(np.exp(np.float64(LOGIT_FLOOR))), e + e * t_lo)
    return jnp.where(never, f(jnp.inf), rate)


def _first_argmin(q: Array) -> tuple[Array, Array]:
    """(min, first index of the min) along the last axis, as two plain reductions."""
    n = q.shape[-1]
    best = jnp.min(q, axis=-1)
    iota = jax.lax.broadcasted_iota(jnp.int32, q.shape, q.ndim - 1)
    arg = jnp.min(jnp.where(q == best[..., None], iota, n), axis=-1)
    return best, jnp.minimum(arg, n - 1)


def _peel(key: PRNGKey, scores: Array, c: Array, k: int, noise: str) -> Array:
    """k rounds of the race on ``scores`` ``(..., n)``, each over the outcomes not yet
    chosen, with its own row maximum and fresh noise: int32 ``(..., k)``, -1 once a row
    has no finite score left. Equal in law to the one-shot k smallest of ``E_i r_i``
    (memorylessness), but each round's rates are relative to *its own* maximum, so the
    clipping at :data:`LOGIT_FLOOR` and the relative rounding hold round by round.

    Round t's noise is :func:`jaxdp._random.race_from_words` of step t's bits from
    :func:`jaxdp._random.streams` (stream t of a threefry key's words, else the t-th
    of split keys): streams keep a ``vmap`` over keys from building and transposing
    a ``(batch, k, 2)`` array of split keys.
    """
    iota = jax.lax.broadcasted_iota(jnp.int32, scores.shape, scores.ndim - 1)
    xs, round_bits = _random.streams(key, k, math.prod(scores.shape))

    def round_(remaining, x):
        row_max = jnp.max(remaining, axis=-1, keepdims=True)
        bits = round_bits(x, remaining.shape)
        variates = _random.race_from_words(noise, *bits, scores.dtype)
        best, arg = _first_argmin(variates * race_rates(remaining, row_max, c))
        arg = jnp.where(best == jnp.inf, -1, arg)
        return jnp.where(iota == arg[..., None], -jnp.inf, remaining), arg

    init = _tracing.varying_like(scores, key, xs, c)  # shard_map: rounds vary as the key
    out = jax.lax.scan(round_, init, xs)[1]  # (k, ...)
    return jnp.moveaxis(out, 0, -1).astype(jnp.int32)


def noisy_argmax(
    key: PRNGKey,
    logits: Logits,
    shape: tuple[int, ...],
    noise: str,
    k: int | None = None,
) -> Array:
    """argmax (or top-k) of ``logits.values() + noise`` for draws of ``shape``, as a race.

    The rates are computed from the factors of ``logits`` (:func:`race_rates`,
    the scale rounded down); ``shape`` ends with dims that the batch broadcasts
    to. Returns int32 ``shape`` (``shape + (k,)`` for top-k). Ties between equal
    products go to the lowest index; ``-inf`` scores are never selected unless
    the whole row is ``-inf`` (top-k: positions past the finite scores are -1).
    """
    logits = _logits.no_gradient(logits.as_float())
    scores = logits.scores
    if scores.dtype != jnp.float64:
        scores = scores.astype(jnp.float32)
    batch = logits.batch
    row_max = logits.row_max[..., None]
    c = round_down_scale(logits.scale)[..., None]
    n = scores.shape[-1]
    num_lead, tail = split_shape(shape, batch)
    num_rows = int(np.prod(tail, dtype=np.int64))
    scores = jnp.broadcast_to(scores, tail + (n,)).reshape(num_rows, n)
    row_max = jnp.broadcast_to(row_max, tail + (1,)).reshape(num_rows, 1)
    c = jnp.broadcast_to(c, tail + (1,)).reshape(num_rows, 1)
    key = fast_key(key)
    suffix = () if k is None else (k,)
    out_shape = shape + suffix
    if math.prod(out_shape) == 0:  # no draws (e.g. scores of shape (0, n))
        return jnp.zeros(out_shape, jnp.int32)

    def plan(kind: str) -> tuple[str, int, int]:
        return race_plan(num_lead, num_rows, n, _tuning.race_chunk(kind))

    def build(p: tuple[str, int, int]) -> Callable:
        return partial(_race, plan=p, noise=noise, k=k, num_lead=num_lead)

    out = _tuning.staged(plan, build, key, scores, row_max, c)
    return out.reshape(out_shape)


def race_plan(num_lead: int, num_rows: int, n: int, chunk: int) -> tuple[str, int, int]:
    """How :func:`noisy_argmax` covers ``num_lead`` draws of ``num_rows`` rows of ``n``
    with at most ``chunk`` noise values a step: ``(layout, per, steps)``.

    * ``("draws", per, steps)``: a step draws ``per`` draws of all rows;
    * ``("rows", per, blocks)``: a step draws one draw of a block of ``per`` rows
      (``num_lead * blocks`` steps);
    * ``("long", width, blocks)``: a step races one row of one draw, scanning its
      candidates in ``blocks`` blocks of ``width`` (``num_lead * num_rows`` steps).
    """
    if num_rows * n <= chunk:
        per, steps = even_chunks(num_lead, chunk // (num_rows * n))
        return "draws", per, steps
    if n <= chunk:
        most = max(1, chunk // n)
        per = _largest_divisor(num_rows, min(most, num_rows))
        if 4 * per < most:
            per = most
        return "rows", per, -(-num_rows // per)
    return "long", chunk, -(-n // chunk)


def race_steps(num_lead: int, num_rows: int, n: int, chunk: int) -> int:
    """Sequential steps (``lax.map`` steps, times scan blocks for long rows) of the race."""
    layout, _, steps = race_plan(num_lead, num_rows, n, chunk)
    if layout == "draws":
        return steps
    if layout == "rows":
        return num_lead * steps
    return num_lead * num_rows * steps


def _race(
    key: PRNGKey,
    scores: Array,
    row_max: Array,
    c: Array,
    *,
    plan: tuple[str, int, int],
    noise: str,
    k: int | None,
    num_lead: int,
) -> Array:
    """The race of :func:`noisy_argmax` on ``(R, n)`` rows, laid out by ``plan``:
    int32 ``(num_lead, R)`` (``+ (k,)`` for top-k)."""
    num_rows, n = scores.shape
    dtype = scores.dtype
    sample_noise = NOISES[noise]
    suffix = () if k is None else (k,)
    layout, per, steps = plan

    if layout == "draws":
        # A step draws `per` i.i.d. draws for all rows at once; rates computed once.
        if k is None:
            rates = race_rates(scores, row_max, c)

            def body(key: PRNGKey, step: Array) -> Array:
                return _first_argmin(sample_noise(key, (per, num_rows, n), dtype) * rates[None])[1]

        else:
            many = jnp.broadcast_to(scores, (per, num_rows, n))

            def body(key: PRNGKey, step: Array) -> Array:
                return _peel(key, many, c[None], k, noise)

        out = map_steps(body, key, steps).reshape((steps * per, num_rows) + suffix)
        return out if steps * per == num_lead else out[:num_lead]

    if layout == "rows":
        # A step covers a block of `per` rows of one draw; rates recomputed per block.
        blocks = steps
        pad = blocks * per - num_rows
        if pad:
            scores = jnp.pad(scores, ((0, pad), (0, 0)))
            row_max = jnp.pad(row_max, ((0, pad), (0, 0)))
            c = jnp.pad(c, ((0, pad), (0, 0)), constant_values=1.0)

        def body(key: PRNGKey, step: Array) -> Array:
            start = (step % blocks) * per
            part = jax.lax.dynamic_slice_in_dim(scores, start, per, axis=0)
            m = jax.lax.dynamic_slice_in_dim(row_max, start, per, axis=0)
            cb = jax.lax.dynamic_slice_in_dim(c, start, per, axis=0)
            if k is not None:
                return _peel(key, part, cb, k, noise)
            return _first_argmin(sample_noise(key, (per, n), dtype) * race_rates(part, m, cb))[1]

        out = map_steps(body, key, num_lead * blocks)
        return out.reshape((num_lead, blocks * per) + suffix)[:, :num_rows]

    # Rows longer than a chunk: scan the candidates in blocks, keep the running best.
    width, nblocks = per, steps
    padded = jnp.pad(scores, ((0, 0), (0, nblocks * width - n)), constant_values=-jnp.inf)

    def race_row(key: PRNGKey, row: Array, m: Array, cr: Array, chosen: Array | None):
        """(min, first argmin) of the race over one long row, outcomes in ``chosen`` excluded."""

        def block(b: Array) -> Array:
            part = jax.lax.dynamic_slice_in_dim(row, b * width, width)
            if chosen is None:
                return part
            idx = b * width + jnp.arange(width, dtype=jnp.int32)
            return jnp.where(jnp.any(idx[:, None] == chosen[None, :], axis=-1), -jnp.inf, part)

        if chosen is not None:  # this round's own row maximum
            start = _tracing.varying_like(jnp.array(-jnp.inf, row.dtype), row, chosen)
            m = jax.lax.fori_loop(
                0, nblocks, lambda b, mx: jnp.maximum(mx, jnp.max(block(b))), start
            ).reshape(1)
        block_keys = jax.random.split(key, nblocks)

        def scan_block(carry, xs):
            block_key, b = xs
            q = sample_noise(block_key, (width,), dtype) * race_rates(block(b), m, cr)
            best, arg = carry
            qmin, qarg = _first_argmin(q)
            better = qmin < best  # earlier block wins ties: the lowest index
            return (jnp.where(better, qmin, best), jnp.where(better, qarg + b * width, arg)), None

        init = (jnp.array(jnp.inf, dtype), jnp.array(0, jnp.int32))
        init = _tracing.varying_like(init, key, row, m, cr, chosen)  # shard_map
        return jax.lax.scan(scan_block, init, (block_keys, jnp.arange(nblocks, dtype=jnp.int32)))[0]

    def body(key: PRNGKey, step: Array) -> Array:
        r = step % num_rows
        row, m, cr = padded[r], row_max[r], c[r]
        if k is None:
            return race_row(key, row, m, cr, None)[1]

        def round_(carry, round_key):
            chosen, i = carry
            best, arg = race_row(round_key, row, m, cr, chosen)
            return (chosen.at[i].set(jnp.where(best == jnp.inf, -1, arg)), i + 1), None

        init = (jnp.full((k,), -1, jnp.int32), jnp.zeros((), jnp.int32))
        init = _tracing.varying_like(init, key, row, m, cr)  # shard_map
        return jax.lax.scan(round_, init, jax.random.split(key, k))[0][0]

    out = map_steps(body, key, num_lead * num_rows)
    return out.reshape((num_lead, num_rows) + suffix)
