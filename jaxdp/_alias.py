"""Many draws from one row: an alias table built in double-float, drawn with 64 bits.

When a row is drawn from many times (``S`` draws per row, ``S`` large against
the row's ``n``), the per-draw work of the descent (:mod:`jaxdp._descent`: a
16-lane gather, a sorting network and a 64-bit uniform per level) dominates.
An alias table (Walker 1977; Vose 1991) makes every draw O(1): a uniform column
``j`` of ``N = 2**b >= n`` columns and one comparison of a uniform against the
column's threshold ``tau_j``, returning ``j`` below it and ``alias_j`` above.

Construction, vectorised and in double-float (``(hi, lo)`` float32 pairs, 48
bits). Weights are measured in *column units* ``c_i = N w_i / sum(w)``. Items
with ``c_i < 1`` are light, the others heavy; both keep the row's order.
The classic sequential sweep — the current heavy fills the next light,
and turns light itself once its residual drops below 1, to be filled by the
next heavy — has a closed form in prefix sums (Hübschle-Schneider & Sanders,
"Parallel weighted random sampling", 2019, give a parallel sweep of this kind):
with ``D(k)`` the lights' cumulative deficits ``1 - c`` and ``S(h)`` the heavies'
cumulative surpluses ``c - 1``, after lights ``1..k`` and heavies ``1..h-1``
have been settled the residual of heavy ``h`` is ``1 + S(h) - D(k)``. Hence

* light ``k`` keeps ``tau_k = c_k`` and is aliased to the first heavy ``h`` with
  ``S(h) >= D(k - 1)``;
* heavy ``h`` keeps ``tau_h = 1 + S(h) - D(k*)``, ``k*`` the first light with
  ``D(k*) > S(h)`` (1 if there is none: the last heavy), and is aliased to
  heavy ``h + 1``.

Two binary searches over the prefix sums replace the sequential loop.

Law (``SECURITY.md``, "the categorical kernel", item 5). Outcome ``i`` is
drawn with probability ``(t_i + sum_{j: alias_j = i} (1 - t_j)) / N`` for the
*stored* thresholds ``t``, whatever rounding produced them: every column holds
exactly ``1 / N``, so the implemented law is exactly computable from the tables.
A light's share is its own weight (relative error ``~3u**2``); a heavy's mass,
at least one column, telescopes over the lights it serves to its weight up to the
prefix sums' rounding at the ends of its run: relative ``a_t <= 16 u**2 N (b +
1)``. The thresholds are ``64 - b``-bit fixed point, compared with the ``64 - b``
bits of the draw that the column index did not use: an *absolute* error of a few
units of ``2**-(64 - b)`` per column, at most ``2**-(61 - b)`` of mass over all
outcomes, which goes to δ'. :func:`guarantee` states the result.

Cost. Per row: two double-float prefix scans and two binary searches over ``N``
entries (``O(N log N)``, no sort). Per draw: two 32-bit words, two gathers and
two compares, against the descent's two to six levels of sixteen lanes.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from . import _twofloat as tf
from ._typing import Array, PRNGKey

#: Largest row the alias table is built for: ``N = 2**24`` columns keeps the
#: heavies' relative error below ``2**-22`` and the fixed-point grid at ``2**-40``.
MAX_LOG2_COLUMNS = 20


def log2_columns(n: int) -> int:
    """``b`` with ``N = 2**b`` columns for rows of ``n`` outcomes (at least 2, so that
    the threshold's high word stays below ``2**31``)."""
    return max(2, math.ceil(math.log2(max(n, 1))))


def _scan(h: Array, lo: Array) -> tuple[Array, Array]:
    """Inclusive double-float prefix sums along the last axis, non-decreasing."""
    return _cummax(*tf.dd_cumsum(h, lo, h.ndim - 1))


def _flat_take(table: Array, at: Array) -> Array:
    """``table[r, at[r, ...]]`` for ``(R, N)`` tables and ``(R, ...)`` positions, as one
    1-D gather (XLA:CPU's 2-D ``take_along_axis`` gather is several times slower)."""
    num_rows, size = table.shape
    rows = jax.lax.broadcasted_iota(jnp.int32, at.shape, 0)
    return jnp.take(table.reshape(-1), rows * size + at, mode="clip")


def _lower_bound(keys_h, keys_l, q_h, q_l, steps: int, strict: bool) -> Array:
    """Per query, the first position ``p`` with ``key[p] >= q`` (``> q`` when
    ``strict``) in its row's non-decreasing keys, else ``N``: a binary search."""
    size = keys_h.shape[-1]
    lo = jnp.zeros(q_h.shape, jnp.int32)
    hi = jnp.full(q_h.shape, size, jnp.int32)
    for _ in range(steps):
        mid = (lo + hi) // 2
        at = jnp.minimum(mid, size - 1)
        kh, kl = _flat_take(keys_h, at), _flat_take(keys_l, at)
        below = tf.dd_le(kh, kl, q_h, q_l) if strict else tf.dd_lt(kh, kl, q_h, q_l)
        active = lo < hi
        lo = jnp.where(active & below, mid + 1, lo)
        hi = jnp.where(active & ~below, mid, hi)
    return lo


def _to_fixed(th: Array, tl: Array, b: int) -> tuple[Array, Array]:
    """``tau`` in [0, 1] (double-float) as ``64 - b``-bit fixed point ``(high, low)``,
    within a few units of the last place, clamped below 1 (``high < 2**(32 - b)``)."""
    f32 = jnp.float32
    top = 2 ** (32 - b)
    x = th * f32(top)  # exact (a power of two)
    high = jnp.floor(x)
    yh, yl = tf.two_sum(x - high, tl * f32(top))  # the fraction below the high word
    carry = jnp.floor(yh)  # -1, 0 or 1
    fh, fl = tf.fast_two_sum(yh - carry, yl)
    a = fh * f32(2.0**32)  # exact; an integer once fh >= 2**-8
    low = jnp.clip(jnp.floor(a), 0, f32(2.0**32 - 256)).astype(jnp.uint32)
    adjust = jnp.clip(jnp.floor(fl * f32(2.0**32)), -(2.0**20), 2.0**20).astype(jnp.int32)
    new_low = low + adjust.astype(jnp.uint32)  # wraps
    borrow = (adjust < 0) & (new_low > low)
    over = (adjust > 0) & (new_low < low)
    high = high.astype(jnp.int32) + carry.astype(jnp.int32) + over - borrow
    full = high >= top
    empty = high < 0
    high = jnp.clip(high, 0, top - 1).astype(jnp.uint32)
    low = jnp.where(full, jnp.uint32(2**32 - 1), jnp.where(empty, jnp.uint32(0), new_low))
    return high, low


def _cummax(h: Array, lo: Array) -> tuple[Array, Array]:
    """Running lexicographic maximum: makes rounded prefix sums non-decreasing."""

    def combine(a, b):
        take_b = tf.dd_le(a[0], a[1], b[0], b[1])
        return jnp.where(take_b, b[0], a[0]), jnp.where(take_b, b[1], a[1])

    return jax.lax.associative_scan(combine, (h, lo), axis=h.ndim - 1)


def build(w: Array) -> tuple[Array, Array, Array]:
    """Alias tables for weights ``w`` ``(R, n)`` (non-negative).

    Returns ``(packed, low, ok)``: ``(R, N)`` uint32 words ``high << b | alias`` and
    the thresholds' low words (column ``j`` is outcome ``j``; columns ``>= n`` have
    threshold 0), and ``(R,)`` the rows' validity (a positive, finite total).
    """
    num_rows, n = w.shape
    b = log2_columns(n)
    size = 2**b
    f32 = w.dtype.type
    # Exact power-of-two normalisation, so that N / total cannot overflow.
    _, e = jnp.frexp(jnp.max(w, axis=-1, keepdims=True))
    w = jnp.ldexp(w, -jnp.where(jnp.isfinite(e), e, 0))
    w = jnp.pad(w, ((0, 0), (0, size - n)))
    t_h, t_l = tf.dd_sum(w, jnp.zeros_like(w), w.ndim - 1)
    ok = jnp.isfinite(t_h) & (t_h > 0)
    t_h = jnp.where(ok, t_h, 1)[:, None]
    t_l = jnp.where(ok, t_l, 0)[:, None]
    # q = N / total, double-float; c = w q in column units.
    q_h = f32(size) / t_h
    p, pe = tf.two_prod(q_h, t_h)
    q_l = ((f32(size) - p) - pe - q_h * t_l) / t_h
    zero = jnp.zeros_like(w)
    # The constant 1 enters TwoSums below: hidden from XLA's simplifier, which
    # would rewrite (1 + x) - 1 to x and zero the error term.
    one = jnp.broadcast_to(jax.lax.optimization_barrier(f32(1)), w.shape)
    c_h, c_l = tf.dd_mul(w, zero, q_h, q_l)
    heavy = tf.dd_le(one, zero, c_h, c_l)
    # Deficits 1 - c of lights, surpluses c - 1 of heavies (both >= 0), scanned in
    # the rows' own order: lights and heavies need not be separated.
    g_h, g_l = tf.two_sum(jnp.where(heavy, c_h, one), jnp.where(heavy, -one, -c_h))
    g_h, g_l = tf.fast_two_sum(g_h, g_l + jnp.where(heavy, c_l, -c_l))
    d_h, d_l = _scan(jnp.where(heavy, zero, g_h), jnp.where(heavy, zero, g_l))
    s_h, s_l = _scan(jnp.where(heavy, g_h, zero), jnp.where(heavy, g_l, zero))
    pos = jax.lax.broadcasted_iota(jnp.int32, (num_rows, size), 1)
    steps = b + 1
    # A light is served by the first heavy with S >= D before it. S only rises at
    # heavies, so the first position reaching it is a heavy, or position 0 (a
    # query of 0: any heavy, the first one) or none (rounding: the last heavy).
    dx_h = jnp.pad(d_h[:, :-1], ((0, 0), (1, 0)))
    dx_l = jnp.pad(d_l[:, :-1], ((0, 0), (1, 0)))
    server = _lower_bound(s_h, s_l, dx_h, dx_l, steps, strict=False)
    first_heavy = jnp.min(jnp.where(heavy, pos, size), axis=-1, keepdims=True)
    last_heavy = jnp.max(jnp.where(heavy, pos, -1), axis=-1, keepdims=True)
    server_heavy = _flat_take(heavy, jnp.minimum(server, size - 1)) & (server < size)
    server = jnp.where(server_heavy, server, jnp.where(server < size, first_heavy, last_heavy))
    server = jnp.where(last_heavy >= 0, server, pos)  # no heavy at all: rounding
    # A heavy turns light at the first light with D > S(h), keeping 1 + S(h) - D
    # there, and is served by the next heavy; if there is none, it keeps 1.
    k_star = _lower_bound(d_h, d_l, s_h, s_l, steps, strict=True)
    found = k_star < size
    at = jnp.minimum(k_star, size - 1)
    r_h, r_l = tf.dd_add(one, zero, s_h, s_l)
    r_h, r_l = tf.dd_add(r_h, r_l, -_flat_take(d_h, at), -_flat_take(d_l, at))
    later = jnp.where(heavy, pos, size)
    next_heavy = jax.lax.cummin(
        jnp.pad(later[:, 1:], ((0, 0), (0, 1)), constant_values=size), axis=1, reverse=True
    )
    next_heavy = jnp.where(next_heavy < size, next_heavy, pos)
    tau_h = jnp.where(heavy, jnp.where(found, r_h, 1), c_h)
    tau_l = jnp.where(heavy, jnp.where(found, r_l, 0), c_l)
    alias = jnp.where(heavy, jnp.where(found, next_heavy, pos), server)
    tau_h, tau_l = jnp.where(tau_h < 0, 0, tau_h), jnp.where(tau_h < 0, 0, tau_l)
    high, low = _to_fixed(tau_h, tau_l, b)
    packed = (high << np.uint32(b)) | alias.astype(jnp.uint32)
    return packed, low, ok


def _materialise(*tables: Array) -> tuple[Array, ...]:
    """The tables, computed once: XLA would otherwise fuse their elementwise
    producers into the per-draw gathers and recompute them at every draw (100x
    slower on CPU; ``optimization_barrier`` does not stop it there). A sort by the
    column index is the identity and is never fused into a consumer."""
    iota = jax.lax.broadcasted_iota(jnp.int32, tables[0].shape, tables[0].ndim - 1)
    return tuple(jax.lax.sort((iota, *tables), dimension=tables[0].ndim - 1, num_keys=1)[1:])


def draw(key: PRNGKey, packed: Array, low: Array, num_draws: int) -> Array:
    """``(num_draws, R)`` int32 draws from alias tables ``(R, N)``.

    The first 32-bit word picks the column (its top ``b`` bits) and compares its
    other ``32 - b`` bits with the threshold's high word; the second word breaks a
    tie against the low word: a ``64 - b``-bit comparison.
    """
    num_rows, size = packed.shape
    b = int(round(math.log2(size)))
    k_first, k_second = jax.random.split(key)
    shape = (num_draws, num_rows)
    w0 = jax.random.bits(k_first, shape, jnp.uint32)
    w1 = jax.random.bits(k_second, shape, jnp.uint32)
    col = (w0 >> np.uint32(32 - b)).astype(jnp.int32)
    rest = w0 & np.uint32(2 ** (32 - b) - 1)
    flat = col + jax.lax.broadcasted_iota(jnp.int32, shape, 1) * size
    word = jnp.take(packed.reshape(-1), flat, mode="clip")
    high = word >> np.uint32(b)
    keep = (rest < high) | ((rest == high) & (w1 < jnp.take(low.reshape(-1), flat, mode="clip")))
    return jnp.where(keep, col, (word & np.uint32(size - 1)).astype(jnp.int32))


def sample(key: PRNGKey, w: Array, num_draws: int) -> tuple[Array, Array]:
    """Draws for weights ``w`` ``(R, n)``: ``(num_draws, R)`` int32 and row validity."""
    packed, low, ok = build(w)
    packed, low = _materialise(packed, low)
    idx = draw(key, packed, low, num_draws)
    return jnp.minimum(idx, w.shape[-1] - 1), ok


# ----------------------------------------------------------------------------- guarantee


def guarantee(n: int, epsilon: float, weight_error: float) -> tuple[float, float]:
    """(ε', δ') of one draw for rows of ``n`` outcomes whose computed weights are
    within relative ``weight_error`` of the exact mechanism's (``SECURITY.md``).

    ``ε' = ε + 4 weight_error + 2 a_t`` with ``a_t = 16 u**2 N (b + 1)`` (the
    heavies' prefix-sum rounding, relative to their mass of at least one column),
    and ``δ' = (1 + e**ε') 2**-(60 - b)`` (the fixed-point thresholds, summed over
    the columns), ``u = 2**-24``, ``N = 2**b`` columns.
    """
    b = log2_columns(n)
    u = 2.0**-24
    a_t = 16 * u * u * 2**b * (b + 1)
    eps = epsilon + 4 * weight_error + 2 * a_t
    return eps, (1 + math.exp(eps)) * 2.0 ** -(60 - b)
