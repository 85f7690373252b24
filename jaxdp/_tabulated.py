"""Noisy-max laws tabulated once per row, then drawn by the categorical kernel.

For calls with many draws per row (one score vector, ``shape=(S,)`` with ``S``
large), paying ``n`` noise values per draw is wasteful when the *law* of the
noisy argmax can be computed once per row and sampled by
:func:`jaxdp._descent.sample`. (Gumbel noise needs no table here: its law is the
exponential mechanism's, ``softmax(c s)``, and ``report_noisy_max(noise="gumbel")``
draws it with :func:`jaxdp.exponential`'s own kernels.)

* **Exponential noise** (``report_noisy_max(noise="exponential")`` and
  ``permute_and_flip``, the same law): with acceptance probabilities
  ``p_j = exp(-c (max s - s_j))``,

  .. math::

      P(i) = p_i \\int_0^1 \\prod_{j \\ne i} (1 - p_j t)\\, dt ,

  a polynomial of degree ``n - 1`` in ``t``, so Gauss-Legendre quadrature with
  ``m = ceil(n / 2)`` nodes integrates it exactly (:func:`flip_table`).
* **Laplace noise** (``report_noisy_max(noise="laplace")``): its law is an
  integral of products of piecewise-exponential CDFs with ``n`` breakpoints,
  which no fixed quadrature integrates exactly. Split it at the row's top score
  ``s_1`` instead. With ``a_j = exp(-c (s_1 - s_j))`` and ``t = exp(-c (y - s_1))``,
  every candidate is on its upper branch above ``s_1``, so

  .. math::

      P(i \\text{ wins}, \\max \\ge s_1) = \\frac{a_i}{2} \\int_0^1
      \\prod_{j \\ne i} \\Bigl(1 - \\frac{a_j}{2} t\\Bigr) dt ,
      \\qquad P(\\max < s_1) = \\prod_j \\Bigl(1 - \\frac{a_j}{2}\\Bigr),

  permute-and-flip's polynomial at ``p = a / 2`` (:func:`laplace_table`: ``n + 1``
  weights, the last one the event ``max < s_1``). A draw of that last outcome is
  finished by the race *conditioned* on every noisy score being below ``s_1``
  (:func:`conditional_race`): the conditioning event is a product of independent
  events, so the conditioned noise values are independent and each is drawn
  exactly by its own inverse CDF. ``P(max < s_1) <= 1/2`` always (the top
  candidate alone is above ``s_1`` with probability 1/2) and is far smaller
  when several scores lie within a few noise scales of the top (``8.5e-6`` on the
  benchmark's row). For one row, a first stage settles most of those draws
  without the race: the top candidate's conditioned variable and the first other
  candidate below a threshold where all the others' conditioned laws are uniform
  (:func:`_top_split`, :func:`_below_top`); when that one exists, or the top's
  variable is above the threshold, the race runs. So a draw costs the kernel's
  draw plus, on average, a fraction of ``P(max < s_1) n`` conditioned variates
  instead of ``n`` variates.

How the table is computed (the error analysis is in ``SECURITY.md``,
"Finite precision: tabulated noisy max"):

* ``p_j`` are the categorical kernel's weights (relative error ``2 u_exp + 2u``
  at any logit), clipped at ``e**-80`` like the race's rates (the same
  mechanism on the utility ``max(s_j, max s - 80/c)``, exactly as private) and
  at 1. The table is then computed for *these* float ``p_j``: a relative error
  ``eta`` in ``p_j`` is a perturbation of ``s_j`` by at most ``eta / c``, which
  moves permute-and-flip's law by at most ``exp(+-2 eta)``.
* Each factor is ``1 - p_j t = q_j + p_j v`` with ``q_j = 1 - p_j`` exact as a
  double-float (TwoSum) and ``v = 1 - t`` a node stored to 48 bits *relative*
  (:func:`gauss_legendre` computes ``v`` by Newton's method on a recurrence in
  ``v`` itself, so nodes next to ``t = 1`` keep their relative accuracy): the
  sum of two non-negative double-floats, so every factor is relatively exact to
  ``~u**2`` however close ``p_j t`` is to 1.
* The integrand at each node ``t_k`` is ``G_k / (q_i + p_i v_k)`` with
  ``G_k = prod_j (q_j + p_j v_k)`` (a double-float product reduction), summed
  over the nodes with positive weights: all terms are non-negative, so the
  relative error stays ``~n u**2`` for every ``i``, however small ``P(i)``.
  Nodes whose ``G_k`` is below ``2**-64`` are dropped (so no intermediate
  leaves float32's normal range); since the integral is at least ``1 / n``,
  what they carry is below ``2**-64 n sum_k w_k / v_k`` relative.

Cost per row: ``m n`` double-float factors (a few dozen flops each), then
the kernel's per-draw cost (Laplace: plus the conditioned race of the draws
below ``s_1``, compacted and run in chunks of :data:`jaxdp._tuning.RACE_CHUNK`
variates). :func:`use_table` picks this path when its cost model
(:func:`jaxdp._tuning.use_table`) says it is the cheaper, and only for ``n <=
4096`` (:data:`jaxdp._tuning.TABLE_MAX_CANDIDATES`).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from . import _alias, _descent, _logits, _tracing, _tuning
from ._logits import Logits
from ._noisy_kernels import _first_argmin
from ._random import _unit64, bits64
from ._rows import flatten_batch, flatten_rows, split_shape
from ._threefry import fast_key
from ._twofloat import split, two_sum, unflush
from ._typing import Array, PRNGKey

#: Acceptance probabilities are clipped below at ``e**-LOGIT_FLOOR``, as the race's rates.
LOGIT_FLOOR = 80.0

#: Nodes whose product ``G_k`` is below this are dropped (no subnormal intermediates).
PRODUCT_FLOOR = 2.0**-64

#: Draws per block when the Laplace draws below the top score are located
#: (:func:`_locator`): a count per block, then a search within one block per draw.
COMPACT_BLOCK = 64

#: Weights of :func:`_top_split`'s table below this are set to 0 (their total is
#: below ``(n + 1) 2**-76``, counted in δ'). Above it every double-float low word
#: and partial product of the weights is a normal float (at ``2**-100`` they were
#: not, and XLA flushes subnormals to 0: up to 1.6u against the u + 8nu**2 bound).
FIRST_FLOOR = 2.0**-76


# ----------------------------------------------------------------------------- nodes


@functools.lru_cache(maxsize=64)
def gauss_legendre(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1], float64, each *relatively* accurate.

    Returns ``(v, w)``, ascending ``v``: the ``m`` nodes (the set ``{t_k}`` equals
    the set ``{1 - t_k}``, so ``v`` serves as ``1 - t``) and their weights
    (positive, summing to 1). ``sum_k w_k f(v_k) = int_0^1 f`` for every polynomial
    of degree ``<= 2m - 1``.

    The nodes ``v <= 1/2`` are the roots of ``P_m(1 - 2v)``, found by Newton's
    method on the recurrence for ``D_k = P_k - P_{k-1}`` in ``v`` (no ``1 - x``
    cancellation, so ``v`` has relative error ~1e-15 even next to 0, where
    ``numpy.polynomial.legendre.leggauss`` loses it: 2e-12 at ``m = 500``); the
    others are ``1 - v`` of those. Weights ``4 v (1 - v) / (m P_{m-1})**2``.
    Checked against mpmath by ``tests/test_tabulated.py``.
    """
    if m < 1:
        raise ValueError(f"gauss_legendre: m must be >= 1, got {m}")
    half = (m + 1) // 2  # nodes with v <= 1/2
    k = np.arange(1, half + 1, dtype=np.float64)
    v = np.sin((4 * k - 1) * np.pi / (4 * m + 2) / 2) ** 2  # Tricomi's first guess

    def legendre(v: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
        """(P_degree, P_{degree-1}) at x = 1 - 2v, by the D-recurrence."""
        prev, cur, d = np.ones_like(v), 1 - 2 * v, -2 * v
        if degree == 0:
            return prev, np.zeros_like(v)
        for j in range(1, degree):
            d = (j * d - 2 * (2 * j + 1) * v * cur) / (j + 1)
            prev, cur = cur, cur + d
        return cur, prev

    for _ in range(8):
        pm, pm1 = legendre(v, m)
        x = 1 - 2 * v
        slope = -2 * m * (pm1 - x * pm) / (4 * v * (1 - v))  # d P_m(1 - 2v) / dv
        v = v - pm / slope
    if m % 2:
        v[-1] = 0.5  # the middle node, exactly
    pm1 = legendre(v, m)[1]
    w = 4 * v * (1 - v) / (m * pm1) ** 2
    upper = slice(half - 1 - m % 2, None, -1) if half - m % 2 > 0 else slice(0, 0)
    v_all = np.concatenate([v, 1 - v[upper]])
    w_all = np.concatenate([w, w[upper]])
    return v_all, w_all / math.fsum(w_all)


def _double(x: np.ndarray, dtype) -> tuple[Array, Array]:
    """float64 ``x`` as a (hi, lo) pair of ``dtype``: 48 bits relative in float32."""
    hi = x.astype(dtype)
    lo = (x - hi.astype(np.float64)).astype(dtype)
    return jnp.asarray(hi), jnp.asarray(lo)


def integral_bounds(n: int) -> tuple[float, float]:
    """``(m, sum_k w_k / v_k)`` for rows of ``n``: the node count, and the factor
    that bounds the mass of dropped nodes (SECURITY.md)."""
    m = max(1, (n + 1) // 2)
    v, w = gauss_legendre(m)
    return m, float(np.sum(w / v))


# ----------------------------------------------------------------------------- double-float
#
# XLA contracts ``a * b + c`` into a fused multiply-add (on CPU too: about a
# quarter of float32 ``a * b + c`` differ from the separately rounded result), and
# may rewrite ``(x + C) - C`` into ``x`` when ``C`` is a constant. Either breaks an
# error-free transform whose operand is a *rounded* product or a constant. So here
# every product that feeds an error-free transform is exact (a product of 12-bit
# halves, whose contraction changes nothing), rounded products only feed plain
# sums of small terms (where a contraction only removes a rounding), and constants
# pass through an optimisation barrier first.


def _fast_sum(hi, e):
    """Normalise ``hi + e`` (``|e|`` at most about ``u |hi|``) into a (hi, lo) pair."""
    s = hi + e
    return s, e - (s - hi)


def _prod(a, b):
    """``a * b`` of two floats as an unnormalised pair ``(hi, e)``, exact up to
    ``u**2 |a b|``, from the four exact products of their halves (no rounded
    product enters an error-free transform)."""
    a1, a2 = split(a)
    b1, b2 = split(b)
    q, qe = two_sum(a1 * b2, a2 * b1)
    hi, e = two_sum(a1 * b1, q)
    return hi, e + (qe + a2 * b2)


def _add(ah, al, bh, bl):
    """Sum of two non-negative double-floats (relative error ~2u**2)."""
    s, e = two_sum(ah, bh)
    return _fast_sum(s, e + (al + bl))


def _mul(ah, al, bh, bl):
    """Product of two double-floats (relative error ~4u**2)."""
    hi, e = _prod(ah, bh)
    return _fast_sum(hi, e + (ah * bl + al * bh))


def _div(ah, al, bh, bl):
    """Quotient of two positive double-floats (relative error ~4u**2)."""
    q1 = ah / bh
    b1, b2 = split(bh)
    c1, c2 = split(q1)
    # r = a - q1 b: ah - q1_1 b1 is exact (Sterbenz: it is ~2**-12 ah), and so is
    # its difference with the middle terms (both ~2**-12 ah, their difference ~u ah).
    m, me = two_sum(c1 * b2, c2 * b1)
    r = ((ah - c1 * b1) - m) - ((me + c2 * b2) + (q1 * bl - al))
    q2 = r / bh
    return _fast_sum(q1, q2)


def _reduce(hi, lo, combine, init, axis):
    zero = jnp.zeros((), hi.dtype)
    one = jnp.asarray(init, hi.dtype)

    def comb(a, b):
        return combine(a[0], a[1], b[0], b[1])

    return jax.lax.reduce((hi, lo), (one, zero), comb, (axis,))


# ----------------------------------------------------------------------------- tables


def acceptance(scores: Array, row_max: Array, scale: Array) -> Array:
    """Permute-and-flip's acceptance probabilities ``exp(-c (max s - s_j))`` in [e**-80, 1]
    (0 for ``-inf`` scores), from the categorical kernel's weights. ``scale`` is
    rounded down inside (:func:`jaxdp._descent.scale_down`)."""
    w = _descent.weights(scores, row_max, _descent.scale_down(scale))
    floor = scores.dtype.type(np.exp(-LOGIT_FLOOR))
    p = jnp.clip(w, floor, 1)
    return jnp.where(scores == -jnp.inf, jnp.zeros_like(p), p)


def _table_scale(p: Array):
    """``2**ceil(log2 n)`` for rows ``p`` of ``n``: the exact factor that keeps every
    positive table entry a normal float (:func:`flip_table`, :func:`laplace_table`)."""
    return p.dtype.type(2.0 ** math.ceil(math.log2(max(p.shape[-1], 1))))


def flip_table(p: Array) -> Array:
    """Weights ``(R, n)`` proportional to permute-and-flip's law for acceptance
    probabilities ``p`` ``(R, n)`` in [0, 1] (one of them 1 per valid row), each to
    a relative error of about ``n u**2`` before its final rounding (SECURITY.md).
    Scaled by ``2**ceil(log2 n)`` (exact) so that every positive entry is a normal
    float: the integral is in [1/n, 1] and ``p`` in [e**-80, 1]."""
    sh, sl = flip_integrals(p)
    scale = _table_scale(p)
    # Two roundings (sh + sl, then the product), each of a normal float: a
    # double-float product here would round partial products of a tiny p to
    # subnormals, which XLA flushes to 0.
    return (p * scale) * (sh + sl)


def flip_integrals(p: Array) -> tuple[Array, Array]:
    """``int_0^1 prod_{j != i} (1 - p_j t) dt`` for each ``i``, as a double-float pair
    ``(R, n)``, by Gauss-Legendre quadrature with ``ceil(n / 2)`` nodes (exact for
    the polynomial); permute-and-flip's law is ``p_i`` times it."""
    num_rows, n = p.shape
    m = max(1, (n + 1) // 2)

    def plan(kind: str) -> int:  # nodes per step
        return max(1, min(m, _tuning.table_chunk(kind) // max(1, num_rows * n)))

    return _tuning.staged(plan, lambda per: functools.partial(_flip_integrals, per=per), p)


def _flip_integrals(p: Array, per: int) -> tuple[Array, Array]:
    """:func:`flip_integrals` with ``per`` quadrature nodes a step of the scan."""
    num_rows, n = p.shape
    dtype = p.dtype
    m = max(1, (n + 1) // 2)
    v, w = gauss_legendre(m)
    blocks = -(-m // per)
    pad = blocks * per - m
    # Padding nodes get weight 0 (and v = 1: harmless factors).
    v = np.concatenate([v, np.ones(pad)]).reshape(blocks, per)
    w = np.concatenate([w, np.zeros(pad)]).reshape(blocks, per)
    vh, vl = _double(v, dtype)
    wh, wl = _double(w, dtype)
    # 1 - p exactly. The barrier keeps XLA from rewriting (1 + b) - 1 into b inside
    # TwoSum, which it does when an operand is a constant (the error term is lost).
    qh, ql = two_sum(jax.lax.optimization_barrier(jnp.ones_like(p)), -p)
    ps = p[:, None, :]  # (R, 1, n)
    qh, ql = qh[:, None, :], ql[:, None, :]
    floor = dtype.type(PRODUCT_FLOOR)

    def block(acc, xs):
        bvh, bvl, bwh, bwl = xs  # (per,)
        # Factors 1 - p_j t_k = q_j + p_j v_k: (R, per, n), relatively exact.
        ph, pe = _prod(ps, bvh[None, :, None])
        fh, fl = _add(qh, ql, ph, pe + ps * bvl[None, :, None])
        gh, gl = _reduce(fh, fl, _mul, 1.0, 2)  # (R, per): prod over all j
        ah, al = _mul(gh, gl, bwh[None, :], bwl[None, :])
        keep = gh >= floor
        ah = jnp.where(keep, ah, 0)
        al = jnp.where(keep, al, 0)
        th, tl = _div(ah[..., None], al[..., None], fh, fl)  # (R, per, n)
        sh, sl = _reduce(th, tl, _add, 0.0, 1)  # (R, n)
        return _add(acc[0], acc[1], sh, sl), None

    zero = jnp.zeros((num_rows, n), dtype)
    xs = (vh, vl, wh, wl)
    init = _tracing.carry_for(lambda acc: block(acc, tuple(x[0] for x in xs))[0], (zero, zero))
    return jax.lax.scan(block, init, xs)[0]


# ----------------------------------------------------------------------------- dispatch


def laplace_table(p: Array) -> Array:
    """Weights ``(R, n + 1)`` for report-noisy-max with Laplace noise, from the
    acceptance probabilities ``p = a`` (:func:`acceptance`): entry ``i < n``
    proportional to ``P(i wins, max >= s_1)``, entry ``n`` to ``P(max < s_1)``,
    all on :func:`flip_table`'s scale (each relatively exact to about ``n u**2``
    before its final rounding). ``P(max < s_1)`` below :data:`PRODUCT_FLOOR` is
    set to 0 (counted in δ', SECURITY.md)."""
    half = p * p.dtype.type(0.5)  # exact: p >= e**-80 is far above the subnormals
    upper = flip_table(half)
    # P(max < s_1) = prod_j (1 - p_j / 2): the factors of flip_integrals at t = 1.
    qh, ql = two_sum(jax.lax.optimization_barrier(jnp.ones_like(half)), -half)
    gh, gl = _reduce(qh, ql, _mul, 1.0, 1)
    below = gh + gl
    below = jnp.where(below >= p.dtype.type(PRODUCT_FLOOR), below, 0) * _table_scale(p)
    return jnp.concatenate([upper, below[:, None]], axis=-1)


def conditional_race(p: Array, hi: Array, lo: Array) -> Array:
    """The winner of report-noisy-max with Laplace noise *given* that every noisy
    score is below the top score ``s_1``, for acceptance probabilities ``p``
    ``(..., n)`` (``a_j = exp(-c (s_1 - s_j))``, 0 for ``-inf``) and 64 random bits
    ``(hi, lo)`` per candidate: int32 ``(...)``.

    In the race's units (``Q_j = X_j / a_j``, ``X = exp(-c L)``; the winner is the
    smallest ``Q``), the event is ``Q_j > 1`` for every ``j``, independently, and
    ``Q_j - 1`` given it has the CDF ``H_j(x) = a x / (2 - a)`` for ``x <= 1/a - 1``,
    ``1 - 1 / ((1 + x) a (2 - a))`` beyond: concave, ``H_j(0) = 0``. Its inverse at
    the 64-bit uniform ``V`` (and ``1 - V``, from the complemented bits: no
    cancellation) is, with ``a`` for ``a_j``,

        x = V (2 - a) / a                                 if V <= (1 - a) / (2 - a),
        x = ((1 - a)**2 / (a (2 - a)) + V) / (1 - V)      otherwise,

    sums and products of non-negative terms only, so ``x`` is within ``11u``
    (relative) of the exact inverse at the grid value; the branches meet with equal
    value and slope at the boundary, so its rounding costs nothing at first order.
    The per-candidate constants are computed once per row
    (:func:`conditioned_constants`). The winner is the first index of the smallest
    ``x``.
    """
    return _conditioned_argmin(conditioned_constants(p), hi, lo)


def conditioned_constants(p: Array) -> tuple[Array, Array, Array]:
    """Per candidate, the constants of :func:`conditional_race`'s inverse CDF:
    ``(2 - a) / a`` (the slope below the boundary), ``(1 - a)**2 / (a (2 - a))`` (the
    offset above it) and the boundary ``(1 - a) / (2 - a)`` of ``V``; ``+inf`` slope
    and offset for ``a = 0`` (never drawn)."""
    f = p.dtype.type
    one_minus = f(1) - p  # exact for p >= 1/2 (Sterbenz)
    two_minus = f(2) - p
    safe = jnp.where(p > 0, p, f(1))
    slope = jnp.where(p > 0, two_minus / safe, f(jnp.inf))
    offset = jnp.where(p > 0, one_minus * one_minus / (safe * two_minus), f(jnp.inf))
    return slope, offset, one_minus / two_minus


def _conditioned_x(constants: tuple[Array, Array, Array], hi: Array, lo: Array):
    """The conditioned race's variables ``x`` and their uniforms ``V``, from
    :func:`conditioned_constants` (broadcasting against the bits)."""
    slope, offset, bound = constants
    v = _unit64(hi, lo, 32, slope.dtype)
    v_c = _unit64(~hi, ~lo, 32, slope.dtype)  # 1 - V on the same grid
    return jnp.where(v <= bound, v * slope, (offset + v) / v_c), v


def _conditioned_argmin(constants: tuple[Array, Array, Array], hi: Array, lo: Array) -> Array:
    """:func:`conditional_race` from :func:`conditioned_constants` (broadcasting
    against the bits ``(..., n)``)."""
    return _first_argmin(_conditioned_x(constants, hi, lo)[0])[1]


@custom_vmap
def _batch_max(x: Array) -> Array:
    """``x``; under ``vmap``, its maximum over the batch, unbatched (at every level
    of nested ``vmap``s). For the trip count of a loop whose extra steps change
    nothing: its predicate is then never batched, which ``checkify`` requires
    (it refuses batched while loops; a batched predicate would run every member
    as long as the longest anyway)."""
    return x


@_batch_max.def_vmap
def _batch_max_rule(axis_size: int, in_batched: list[bool], x: Array) -> tuple[Array, bool]:
    (batched,) = in_batched
    return _batch_max(jnp.max(x, axis=0) if batched else x), False


def _locator(flat: Array, marker: int):
    """``(locate, total)`` for the entries of ``flat`` equal to ``marker``: ``total``
    of them, and ``locate(start, width)`` the flat positions of those of ranks
    ``start .. start + width - 1`` (``size`` past the last). A count per block of
    :data:`COMPACT_BLOCK` entries, then a search within the block of each rank."""
    size = flat.shape[0]
    blocks = -(-size // COMPACT_BLOCK)
    hits = jnp.pad(flat == marker, (0, blocks * COMPACT_BLOCK - size))
    hits = hits.reshape(blocks, COMPACT_BLOCK)
    counts = jnp.sum(hits, axis=1, dtype=jnp.int32)
    ends = jnp.cumsum(counts)

    def locate(start: Array, width: int) -> Array:
        rank = start + jax.lax.iota(jnp.int32, width)
        block = jnp.searchsorted(ends, rank, side="right").astype(jnp.int32)
        block = jnp.minimum(block, blocks - 1)
        within = rank - (ends[block] - counts[block])
        seen = jnp.cumsum(hits[block], axis=1, dtype=jnp.int32)
        at = jnp.argmax(seen > within[:, None], axis=1).astype(jnp.int32)
        return jnp.where(rank < ends[-1], block * COMPACT_BLOCK + at, size)

    return locate, ends[-1]


def _prefix_products(hi: Array, lo: Array, width: int = 32) -> tuple[Array, Array]:
    """Inclusive prefix products of the double-floats ``(hi, lo)`` ``(n,)``, by blocks of
    ``width``: a scan along the blocks' columns (all blocks at once), a scan over
    the block totals, and one product joining them. Each output is a chain of at
    most ``n`` :func:`_mul` (relative error ``<= 4 n u**2``, as in any order). Two
    short scans keep the program small: ``lax.associative_scan`` over ``n`` took
    1.5 s to compile on CPU at ``n = 1000``."""
    n = hi.shape[0]
    blocks = -(-n // width)
    pad = blocks * width - n
    one = jnp.ones((pad,), hi.dtype)
    bh = jnp.concatenate([hi, one]).reshape(blocks, width).T  # (width, blocks)
    bl = jnp.concatenate([lo, jnp.zeros_like(one)]).reshape(blocks, width).T

    def step(c, x):
        c = _mul(c[0], c[1], x[0], x[1])
        return c, c

    start = (jnp.ones((blocks,), hi.dtype), jnp.zeros((blocks,), hi.dtype))
    start = _tracing.varying_like(start, hi, lo)  # shard_map
    (th, tl), (ph, pl) = jax.lax.scan(step, start, (bh, bl))  # within blocks
    unit = _tracing.varying_like((jnp.ones((), hi.dtype), jnp.zeros((), hi.dtype)), hi, lo)
    _, (xh, xl) = jax.lax.scan(lambda c, x: (_mul(c[0], c[1], x[0], x[1]), c), unit, (th, tl))
    ih, il = _mul(xh[None, :], xl[None, :], ph, pl)  # block prefix x within-block
    return ih.T.reshape(-1)[:n], il.T.reshape(-1)[:n]


def _top_split(p: Array):
    """For one row ``p`` ``(n,)``: the top candidate ``t``, a threshold ``X*`` and the
    weights of the *first* other candidate whose conditioned variable is below
    ``X*`` (``n + 1`` outcomes, the last one "none"), for :func:`_below_top`.

    ``X*`` stays below every other candidate's ``1/a_j - 1``, where its conditioned
    CDF is linear, ``H_j(x) = b_j x`` with ``b_j = a_j / (2 - a_j)``: below ``X*``
    each is independently present with probability ``pi_j = b_j X*`` and then
    uniform on ``[0, X*)``. It is also at most ``1 / max(B, sqrt(B))``, ``B = sum
    b_j``, so that ``sum pi_j <= 1``. ``pi_j`` and the products ``prod_{l<j} (1 -
    pi_l)`` are double-floats (relative error ~``n u**2``), rounded once."""
    f = p.dtype.type
    t = jnp.argmax(p).astype(jnp.int32)  # the first top candidate (a = 1)
    rest = p.at[t].set(0)
    p2 = jnp.max(rest)
    linear = jnp.where(p2 > 0, (f(1) - p2) / jnp.where(p2 > 0, p2, f(1)), f(1))
    linear = linear * f(1 - 2.0**-20)  # strictly below (1 - p2) / p2 despite the roundings
    total = jnp.sum(rest / (f(2) - rest))
    x_star = jnp.minimum(linear, f(1) / jnp.maximum(total, jnp.sqrt(total)))
    # a_j X* from exact power-of-two rescalings of both: a_j may be e**-80, whose low
    # half is subnormal (XLA flushes it to 0, a 2**-12 relative error), while X* is
    # at least ~u or exactly 0 (tied tops), so X* 2**-64 stays normal.
    ph, pe = _prod(*unflush(rest, jnp.broadcast_to(x_star, rest.shape)))
    ph, pl = _fast_sum(ph, pe)
    dh, dl = two_sum(jax.lax.optimization_barrier(jnp.full_like(rest, 2)), -rest)
    pih, pil = _div(ph, pl, dh, dl)  # pi_j = a_j X* / (2 - a_j)
    qh, ql = two_sum(jax.lax.optimization_barrier(jnp.ones_like(rest)), -pih)
    qh, ql = _fast_sum(qh, ql - pil)  # 1 - pi_j >= 1/2
    ih, il = _prefix_products(qh, ql)
    eh = jnp.concatenate([jnp.ones((1,), p.dtype), ih[:-1]])
    el = jnp.concatenate([jnp.zeros((1,), p.dtype), il[:-1]])
    wh, wl = _mul(pih, pil, eh, el)
    w = jnp.concatenate([wh + wl, (ih[-1] + il[-1])[None]])
    return t, x_star, jnp.where(w >= f(FIRST_FLOOR), w, 0)


def _below_top(key: PRNGKey, p: Array, idx: Array) -> Array:
    """Replace every draw ``idx == n`` (the event ``max < s_1``) of ``idx``
    ``(num_lead, R)`` by a draw of the race conditioned on it, on its row of ``p``
    ``(R, n)``.

    Several rows: :func:`conditional_race`, ``n`` variates a draw. One row (the
    W1 shape) first draws, for every draw at once, the top candidate's variable
    ``z`` and the first other candidate ``f`` below ``X*`` (:func:`_top_split`; a
    uniform and an alias draw, about the cost of a draw of the exponential
    mechanism): for a draw below ``s_1`` with ``z < X*`` and no such ``f``, every
    other variable is above ``z`` and the top candidate wins. The rest (``z >=
    X*``, or such an ``f``) run the race with ``z`` fixed, the candidates before
    ``f`` out (they are above ``X* > z``), ``f`` uniform on ``[0, X*)`` and those
    after it fresh. The exact conditional law either way; with a top far above the
    rest, few draws reach the race.

    The draws that race are located by their ranks (:func:`_locator`) and raced in
    chunks of about :data:`jaxdp._tuning.RACE_CHUNK` variates, as many chunks as
    there are such draws (a loop whose trip count depends on the data: SECURITY.md,
    "Timing and side channels"; under ``vmap`` the batch's largest,
    :func:`_batch_max`). Chunk ``k`` takes its bits from ``fold_in`` of the race's
    key and ``k``.
    """
    num_rows, n = p.shape
    shape = idx.shape
    flat = idx.reshape(-1)
    size = flat.shape[0]

    def plan(kind: str) -> int:
        return max(1, min(size, _tuning.race_chunk(kind) // n))

    def build(chunk: int):
        def run(key: PRNGKey, p: Array, flat: Array) -> Array:
            constants = conditioned_constants(p)  # (R, n) each, once per row
            key_z, key_f, key_r = jax.random.split(key, 3)
            marker = n
            if num_rows == 1:
                t, x_star, first_w = _top_split(p[0])
                top = tuple(c[0, t] for c in constants)
                # every draw's first stage at once: a uniform and an alias draw each
                zs = _conditioned_x(top, *bits64(key_z, (size,)))[0]
                fs = _alias.sample(key_f, first_w[None], size)[0][:, 0]
                below = flat == n
                settled = below & (zs < x_star) & (fs == n)
                flat = jnp.where(settled, t, jnp.where(below, n + 1, flat))
                marker = n + 1
            locate, total = _locator(flat, marker)

            def race(k, out):
                pos = locate(k * chunk, chunk)
                hi, lo = bits64(jax.random.fold_in(key_r, k), (chunk, n))
                if num_rows == 1:  # one row: broadcast its constants, no gather
                    x, v = _conditioned_x(constants, hi, lo)
                    at = jnp.minimum(pos, size - 1)
                    z, first = zs[at][:, None], fs[at][:, None]
                    j = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
                    inside = z < x_star  # then a candidate `first` is below X*
                    x = jnp.where(inside & (j < first), p.dtype.type(jnp.inf), x)
                    x = jnp.where(inside & (j == first), v * x_star, x)
                    winners = _first_argmin(jnp.where(j == t, z, x))[1]
                else:
                    at_row = jnp.where(pos < size, pos % num_rows, 0)
                    winners = _conditioned_argmin(tuple(c[at_row] for c in constants), hi, lo)
                return out.at[pos].set(winners.astype(out.dtype), mode="drop")

            # Steps past the last such draw write nothing (their positions are `size`).
            steps = _batch_max((total + (chunk - 1)) // chunk)
            start = _tracing.carry_for(lambda out: race(0, out), flat)  # shard_map
            return jax.lax.fori_loop(0, steps, race, start)

        return run

    return _tuning.staged(plan, build, key, p, flat).reshape(shape)


def use_table(noise: str, draws_per_row: int, n: int, platform: str | None = None) -> bool:
    """Whether :func:`draw` (tabulate, then the categorical kernel) is used for these
    static sizes on ``platform`` (default: the default backend):
    :func:`jaxdp._tuning.use_table` (a cost model)."""
    return _tuning.use_table(noise, draws_per_row, n, platform)


def draw(key: PRNGKey, logits: Logits, shape: tuple[int, ...], noise: str) -> tuple[Array, Array]:
    """Draws of ``shape`` from the noisy-max law of ``noise`` (``"exponential"`` or
    ``"laplace"``) on ``logits``, tabulated per row: ``(int32 shape, ok)``, ``ok`` of
    the tail batch's shape.

    The scale of ``logits`` is the unrounded ``epsilon / (2 sensitivity)`` (or
    ``/ sensitivity``), clamped; it is rounded down here.
    """
    logits = _logits.no_gradient(logits.as_float())
    scores = logits.scores
    if scores.dtype != jnp.float64:
        scores = scores.astype(jnp.float32)
    batch, n = logits.batch, logits.n
    num_lead, tail = split_shape(shape, batch)
    if math.prod(shape) == 0:
        return jnp.zeros(shape, jnp.int32), jnp.ones(tail, bool)
    num_rows = math.prod(tail)
    rows = flatten_rows(jnp.broadcast_to(scores, batch + (n,)), tail)
    c = flatten_batch(logits.scale, tail)
    row_max = flatten_batch(logits.row_max, tail)
    # A row without a finite maximum is invalid (masked by the caller); keep it NaN-free.
    safe_max = jnp.where(jnp.isfinite(row_max), row_max, 0)
    if noise == "exponential":
        w = flip_table(acceptance(rows, safe_max, c))
    elif noise == "laplace":
        p = acceptance(rows, safe_max, c)
        w = laplace_table(p)
        key, rest_key = jax.random.split(key)
    else:
        raise ValueError(f"no tabulated law for noise={noise!r}")
    idx, ok = _descent.sample(fast_key(key), w, num_lead)
    if noise == "laplace":  # the draws of the last outcome, max < s_1, finished
        idx = _below_top(rest_key, p, idx)
    ok = ok.reshape(num_rows) & jnp.isfinite(row_max)
    return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)


# ----------------------------------------------------------------------------- guarantee


def table_error(n: int, dtype=np.float32) -> float:
    """Bound on the relative error of each :func:`flip_table` entry against the exact
    law of its float ``p`` (before the final rounding to ``dtype``)."""
    u = float(np.finfo(dtype).eps) / 2
    m, spread = integral_bounds(n)
    node = 2 * u * u + 1e-14  # 48-bit pairs (float32) of nodes computed to <= 1e-14
    weight = 2 * u * u + 1e-10  # weights computed to <= 1e-10 (tests/test_tabulated.py)
    arithmetic = (8 * n + 2 * m + 20) * u * u
    underflow = 4 * n * 2.0**-62 + PRODUCT_FLOOR * n * spread
    return n * node + weight + arithmetic + underflow


#: Relative error of :func:`conditional_race`'s variable against the exact inverse
#: CDF at its 64-bit grid value, in units of ``u``: the uniform (3u), two
#: subtractions, three products or quotients and a sum of non-negative terms.
CONDITIONED_ERROR_U = 11


def guarantee(n: int, epsilon: float, noise: str = "exponential", dtype=np.float32):
    """(ε', δ') of one tabulated draw for rows of ``n`` (SECURITY.md).

    Exponential noise (permute-and-flip): the categorical kernel's
    :func:`jaxdp._descent.guarantee` for given weights, plus ``4 (table_error +
    2u)`` on ε (the table's error and its two final roundings), the same δ'.
    Laplace: the kernel's over ``n + 1`` outcomes, the same table term, plus ``4
    CONDITIONED_ERROR_U u`` on ε (the conditioned race, whose law is within
    ``exp(+-2 CONDITIONED_ERROR_U u)`` of the exact conditional law up to ``(n +
    1) 2**-65`` per outcome) and twice the relative error of the first stage's
    table (:func:`_top_split`: its rounding, its products and the alias table's
    ``a_t``), and on δ' the conditioned race's ``n (n + 1) (1 + e**ε') 2**-65``,
    the ``(1 + e**ε') 2**-64`` of a ``P(max < s_1)`` set to 0 below
    :data:`PRODUCT_FLOOR`, and the first stage's alias grid and floor. (Gumbel
    noise is not tabulated: a ``ValueError``.)
    """
    if noise not in ("exponential", "laplace"):
        raise ValueError(f"no tabulated law for noise={noise!r}")
    laplace = noise == "laplace"
    eps, delta = _descent.guarantee(n + laplace, epsilon, dtype, recomputed=False)
    u = float(np.finfo(dtype).eps) / 2
    eps = eps + 4 * (table_error(n, dtype) + 2 * u)
    if laplace:
        # one row's first stage: the table of the first candidate below X*
        # (double-float weights rounded once, then an alias table over n + 1 outcomes)
        b = _alias.log2_columns(n + 1)
        first = u + 8 * n * u * u + 2 * _alias.table_error(b)
        eps += 4 * CONDITIONED_ERROR_U * u + 2 * first
        delta += (n * (n + 1) * 2.0**-65 + PRODUCT_FLOOR) * (1 + math.exp(eps))
        delta += (2.0 ** -(60 - b) + (n + 1) * FIRST_FLOOR) * (1 + math.exp(eps))
    return eps, delta
