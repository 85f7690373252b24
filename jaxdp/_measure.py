"""The exponential mechanism with a base measure: weights ``mu(r) exp(c (s_r - m))``
exact to a few ulp, drawn by the categorical descent or by an exponential race.

With a public, data-independent base measure ``mu`` (given as ``log_measure``
``lambda_r = log mu(r)``; ``-inf`` excludes ``r``) the exponential mechanism
draws ``r`` with probability proportional to ``mu(r) exp(c s_r)``, ``c =
epsilon / (2 sensitivity)`` (McSherry & Talwar 2007 define it this way). This
module computes each outcome's *combined logit* ``L_r = c (s_r - m) + lambda_r``
relative to a row constant, to a few float32 roundings *absolute* (so to a few
ulp *relative* in the weight ``exp(L_r)``) whatever the magnitudes of
``c (s_r - m)`` and ``lambda_r`` that cancel in it; a plain float32 sum
``fl(fl(c (s_r - m)) + lambda_r)`` is off by ``u |c (s_r - m)| + u |L_r|``, 1e-5
of epsilon at a logit of -80 and unbounded when a large measure offsets a low
score.

The combined logit, for a row with scores ``s``, log-measure ``lambda`` and
scale ``c`` (rounded down, :func:`round_down_scale`), over the *live*
outcomes (finite score and finite ``lambda``):

1. ``m = max s`` and ``ref = max lambda`` over the live outcomes (row
   constants: a common factor does not change the law).
2. ``s_r - m = d_hi + d_lo`` (TwoSum, exact); ``d_hi c = p + e`` (TwoProduct
   with mask-split halves, exact); ``lambda_r - ref = l_hi + l_lo`` (exact).
3. ``M = max fl(p + l_hi)`` over the live outcomes: an approximation of the
   largest combined logit, used only as the common shift that keeps the row
   from under- or overflowing (``M`` is in ``[-R_mu, 0]``, ``R_mu`` the spread
   of the row's finite ``lambda``).
4. ``l_hi - M = a_hi + a_lo`` and ``p + a_hi = b_hi + b_lo`` (TwoSum, exact):
   ``b_hi`` is the cancelled, large part of ``L_r - M``; the rest,
   ``rest = (((a_lo + l_lo) + e) + d_lo c) + b_lo``, is small (``<= u`` times the
   magnitudes) and is summed in float.

So ``L_r - M = b_hi + rest + tau_r`` exactly, with ``|tau_r| <= u**2 (20 R_mu +
1400)`` for every outcome whose weight is in the normal range (derivation in
``SECURITY.md``, "Finite precision: the base measure"). The weight is
``exp(b_hi) exp(rest)`` (the descent) and the race rate ``exp(-b_hi)
exp(-rest)`` (Gumbel-max as ``argmin E_r / w_r``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from . import _descent, _random, _tracing, _tuning
from ._logits import clip_scale
from ._noisy_kernels import round_down_scale
from ._rows import broadcast_batch, even_chunks, map_steps, split_shape
from ._threefry import fast_key
from ._twofloat import balance, exp_small, two_prod, two_sum
from ._typing import Array, PRNGKey


def combined_logits(scores: Array, log_measure: Array, scale: Array) -> tuple[Array, Array, Array]:
    """``(hi, lo, ok)``: ``L_r - M = hi + lo`` for every live outcome, per row.

    ``scores`` and ``log_measure`` ``(R, n)`` float (the same dtype); ``scale``
    ``(R,)``, finite, normal and > 0 (already rounded down). ``hi`` is ``-inf``
    and ``lo`` 0 for an outcome that is not live (a ``-inf`` score or a ``-inf``
    log-measure) and for one whose scaled gap overflows. ``ok`` ``(R,)``: the
    row has a live outcome and no NaN or ``+inf`` in either array.
    """
    neg_inf = jnp.array(-jnp.inf, scores.dtype)
    bad = jnp.isnan(scores) | (scores == jnp.inf) | jnp.isnan(log_measure)
    bad = bad | (log_measure == jnp.inf)
    live = (scores > -jnp.inf) & (log_measure > -jnp.inf) & ~bad
    m = jnp.max(jnp.where(live, scores, neg_inf), axis=-1)
    ref = jnp.max(jnp.where(live, log_measure, neg_inf), axis=-1)
    ok = jnp.isfinite(m) & ~jnp.any(bad, axis=-1)
    zero = jnp.zeros_like(m)
    m, ref = jnp.where(ok, m, zero)[:, None], jnp.where(ok, ref, zero)[:, None]
    c = scale[:, None]
    s = jnp.where(live, scores, m)  # dead outcomes: any finite value, masked below
    lam = jnp.where(live, log_measure, ref)
    d_hi, d_lo = two_sum(s, -m)  # s - m, exactly
    d_hi, d_lo, c = balance(d_hi, d_lo, c)  # no subnormal partial product
    p, e = two_prod(d_hi, c)  # d_hi * c, exactly
    l_hi, l_lo = two_sum(lam, -ref)  # lambda - ref, exactly
    approx = jnp.where(live, p + l_hi, neg_inf)
    big = jnp.max(approx, axis=-1, keepdims=True)
    big = jnp.where(jnp.isfinite(big), big, jnp.zeros_like(big))
    a_hi, a_lo = two_sum(l_hi, -big)  # l_hi - M, exactly
    b_hi, b_lo = two_sum(p, a_hi)  # p + (l_hi - M), exactly
    rest = (((a_lo + l_lo) + e) + d_lo * c) + b_lo
    dead = ~live | (p == -jnp.inf)  # a gap times a huge scale: weight 0
    return jnp.where(dead, neg_inf, b_hi), jnp.where(dead, jnp.zeros_like(rest), rest), ok


def weights(hi: Array, lo: Array) -> Array:
    """``exp(hi + lo)`` as ``exp(hi) exp(lo)``: relative error ``2 u_exp + u`` (0 at ``-inf``).

    ``exp(lo)`` is :func:`jaxdp._twofloat.exp_small`, not ``jnp.exp``: XLA would
    rewrite the product of two exponentials into ``exp(hi + lo)``."""
    w = jnp.exp(hi) * exp_small(lo)
    return jnp.where(hi == -jnp.inf, jnp.zeros_like(w), w)


def rates(hi: Array, lo: Array) -> Array:
    """``exp(-(hi + lo))`` likewise (``+inf`` at ``hi = -inf``: never selected)."""
    r = jnp.exp(-hi) * exp_small(-lo)
    return jnp.where(hi == -jnp.inf, jnp.full_like(r, jnp.inf), r)


def log_probs(scores: Array, log_measure: Array, scale: Array) -> tuple[Array, Array]:
    """``(log P[r], ok)`` for rows ``(R, n)``: the combined logits normalised (the
    scale as given, not rounded down: these are the log-probabilities of the
    mechanism as specified)."""
    hi, lo, ok = combined_logits(scores, log_measure, clip_scale(scale))
    logits = hi + lo
    total = jnp.log(jnp.sum(weights(hi, lo), axis=-1, keepdims=True))
    return logits - total, ok


def _rows(scores: Array, log_measure: Array, scale: Array, tail: tuple[int, ...]):
    """Flattened ``(R, n)`` scores and log-measure and ``(R,)`` scale for the tail batch."""
    n = scores.shape[-1]
    num_rows = math.prod(tail)
    s = jnp.broadcast_to(scores, tail + (n,)).reshape(num_rows, n)
    lam = jnp.broadcast_to(log_measure, tail + (n,)).reshape(num_rows, n)
    c = jnp.broadcast_to(jnp.asarray(scale, scores.dtype), tail).reshape(num_rows)
    return s, lam, round_down_scale(c)


def sample(
    key: PRNGKey,
    scores: Array,
    log_measure: Array,
    scale: Array,
    shape: tuple[int, ...],
    method: str,
) -> tuple[Array, Array]:
    """Draws of ``shape`` with ``P[r] ∝ exp(log_measure_r) exp(scale s_r)``.

    ``scores`` ``(*batch, n)``; ``log_measure`` broadcasts against it;
    ``scale`` against the batch. ``method`` is ``"gumbel"`` or
    ``"inverse_cdf"``. Returns int32 draws and a tail-batch flag that the row
    is valid (callers mask invalid rows with -1).
    """
    batch = broadcast_batch(scores.shape[:-1], log_measure.shape[:-1], jnp.shape(scale))
    num_lead, tail = split_shape(shape, batch)
    if math.prod(shape) == 0:
        return jnp.zeros(shape, jnp.int32), jnp.ones(tail, bool)
    s, lam, c = _rows(scores, log_measure, scale, tail)
    hi, lo, ok = combined_logits(s, lam, c)
    if method == "gumbel":
        idx = race(fast_key(key), rates(hi, lo), num_lead)
    else:
        idx, total_ok = _descent.sample(fast_key(key), weights(hi, lo), num_lead)
        ok = ok & total_ok.reshape(ok.shape)
    return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)


# ----------------------------------------------------------------------------- race


def _first_argmin(q: Array) -> tuple[Array, Array]:
    """(min, first index of the min) along the last axis."""
    n = q.shape[-1]
    best = jnp.min(q, axis=-1)
    iota = jax.lax.broadcasted_iota(jnp.int32, q.shape, q.ndim - 1)
    return best, jnp.minimum(jnp.min(jnp.where(q == best[..., None], iota, n), axis=-1), n - 1)


def race_plan(num_draws: int, num_rows: int, n: int, chunk: int) -> tuple[str, int, int]:
    """How :func:`race` covers ``num_draws`` draws of ``num_rows`` rows of ``n`` with at
    most ``chunk`` noise values a step: ``("draws", per, steps)`` (``per`` draws of
    all rows a step), ``("rows", per, blocks)`` (one draw of ``per`` rows a step,
    ``num_draws * blocks`` steps) or ``("long", width, blocks)`` (one row of one
    draw a step, scanned in ``blocks`` blocks of ``width``)."""
    if num_rows * n <= chunk:
        per, steps = even_chunks(num_draws, chunk // (num_rows * n))
        return "draws", per, steps
    if n <= chunk:
        per = max(1, chunk // n)
        return "rows", per, -(-num_rows // per)
    return "long", chunk, -(-n // chunk)


def race(key: PRNGKey, rate: Array, num_draws: int) -> Array:
    """``(num_draws, R)`` draws ``argmin_r E_r rate_r``, ``E`` i.i.d. Exp(1) from 64 bits.

    ``rate`` ``(R, n)``, ``+inf`` for an excluded outcome. At most a chunk of
    noise values (:data:`jaxdp._tuning.RACE_CHUNK`, per backend) is live at once:
    several draws of all rows, a block of rows of one draw, or one row scanned in
    blocks with a running minimum (an earlier block wins ties, so the first index
    wins); :func:`race_plan` says which.
    """
    num_rows, n = rate.shape

    def plan(kind: str) -> tuple[str, int, int]:
        return race_plan(num_draws, num_rows, n, _tuning.race_chunk(kind))

    def build(p: tuple[str, int, int]):
        return lambda key, rate: _race(key, rate, num_draws, p)

    return _tuning.staged(plan, build, key, rate)


def _race(key: PRNGKey, rate: Array, num_draws: int, plan: tuple[str, int, int]) -> Array:
    num_rows, n = rate.shape
    dtype = rate.dtype
    noise = _random.race_exponential
    layout, per, steps = plan
    if layout == "draws":

        def body(key: PRNGKey, step: Array) -> Array:
            return _first_argmin(noise(key, (per, num_rows, n), dtype) * rate[None])[1]

        out = map_steps(body, key, steps).reshape(steps * per, num_rows)
        return out[:num_draws]

    if layout == "rows":
        blocks = steps
        padded = jnp.pad(rate, ((0, blocks * per - num_rows), (0, 0)), constant_values=1.0)

        def body(key: PRNGKey, step: Array) -> Array:
            part = jax.lax.dynamic_slice_in_dim(padded, (step % blocks) * per, per, axis=0)
            return _first_argmin(noise(key, (per, n), dtype) * part)[1]

        out = map_steps(body, key, num_draws * blocks)
        return out.reshape(num_draws, blocks * per)[:, :num_rows]

    width, nblocks = per, steps
    padded = jnp.pad(rate, ((0, 0), (0, nblocks * width - n)), constant_values=jnp.inf)

    def body(key: PRNGKey, step: Array) -> Array:
        row = padded[step % num_rows]

        def scan_block(carry, xs):
            block_key, b = xs
            part = jax.lax.dynamic_slice_in_dim(row, b * width, width)
            qmin, qarg = _first_argmin(noise(block_key, (width,), dtype) * part)
            best, arg = carry
            better = qmin < best
            return (jnp.where(better, qmin, best), jnp.where(better, qarg + b * width, arg)), None

        init = (jnp.array(jnp.inf, dtype), jnp.array(0, jnp.int32))
        init = _tracing.varying_like(init, key, row)  # shard_map
        keys = jax.random.split(key, nblocks)
        return jax.lax.scan(scan_block, init, (keys, jnp.arange(nblocks)))[0][1]

    out = map_steps(body, key, num_draws * num_rows)
    return out.reshape(num_draws, num_rows)


# ----------------------------------------------------------------------------- guarantee


def tau(spread: float, dtype=np.float32) -> float:
    """Bound on the absolute error of a combined logit whose weight is in the normal
    range, for a row whose finite log-measure spans ``spread`` nats (SECURITY.md)."""
    u = float(np.finfo(dtype).eps) / 2
    return u * u * (20.0 * float(spread) + 1400.0)


def guarantee(n: int, epsilon: float, spread: float, method: str, dtype=np.float32):
    """The (ε', δ') of one draw of ``exponential(..., log_measure=...)`` (SECURITY.md).

    ``spread`` is ``R_mu``, the largest difference between two finite entries of
    a row of ``log_measure`` (public). ``"inverse_cdf"`` (and ``"auto"`` where it
    picks it): the descent's bound with ``4 tau`` added to ε' and the underflow
    term ``n e**(ε - 86)`` added to δ'; ``"gumbel"``: the race lemma with rates of two
    exponentials, ``ε' = ε + 54u + 4 tau``, ``δ' = n (1 + e**ε') 2**-65``.
    """
    u = float(np.finfo(dtype).eps) / 2
    t = tau(spread, dtype)
    if method == "gumbel":
        eps_p = epsilon + 54 * u + 4 * t
        return eps_p, n * (1 + math.exp(eps_p)) * 2.0**-65
    eps_p, delta_p = _descent.guarantee(n, epsilon, dtype, recomputed=False)
    floor = 708.0 if np.dtype(dtype) == np.float64 else 86.0
    return eps_p + 4 * t, delta_p + n * math.exp(min(epsilon, 50.0) - floor)
