r"""Joint exponential mechanism for top-k (Gillenwater, Joseph, Muñoz Medina &
Ribero, ICML 2022), sampled exactly over ordered k-tuples.

With the scores sorted, ``c_(1) >= ... >= c_(n)``, a sequence ``s`` of k
distinct outcomes has error ``E(s) = max_i (c_(i) - c_{s_i}) >= 0`` and is drawn
with probability ``∝ exp(-ε E(s) / (2 Δ_u))``. There are n!/(n-k)! sequences,
but only k·n possible errors ``E_ij = c_(i) - c_(j)``: the paper's sampler
groups the sequences by the pair (i, j) where their error is attained, draws a
pair with probability ∝ (number of sequences in the group) × exp(-ε E_ij /
(2Δ_u)), then a sequence uniformly inside the group.

The groups. Let ``i`` be the *first* position whose error equals ``E(s)`` and
``j`` the item there. Then every earlier position ``p < i`` holds an item with
error ``< E`` and every later one an item with error ``<= E``. Those item sets
``A_p = {l: c_(p) - c_(l) < E}`` (``p < i``) and ``{l: c_(p) - c_(l) <= E}``
(``p > i``) grow with ``p`` and ``j`` is in none of the earlier ones, so the
group has exactly ``prod_{p != i} (|A_p| - (p - 1))`` members (positions counted
from 1), and drawing one uniformly is: for ``p = 1..k``, ``p != i``, one item
uniformly from ``A_p`` minus the items already placed. Every sequence is in
exactly one group, so this samples the joint law exactly.

In finite precision (derivation in ``SECURITY.md``, "Finite precision: joint
top-k"): the errors ``c_(p) - c_(l)`` are formed exactly as TwoSum pairs and
compared lexicographically, so the grouping and the counts are those of the
exact errors, ties included; a group's weight ``exp(-ε E / (2Δ_u)) × count``
is computed to a few ulp *relative* (:func:`group_weights`: the integer count
product as a double-float mantissa times an exact power of two, the exponential
split so that its one large ``exp`` sees the whole log-weight) and handed to
the sound categorical kernel (:func:`jaxdp._descent.sample`); the k - 1 uniform
choices inside the group draw an index below the group's size from 64 random
bits with exact integer arithmetic (:func:`uniform_below`), then map it to the
unplaced items in O(k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _descent, _logits, _rows, _threefry, _top_k, _tracing, _tuning
from . import _twofloat as _tf
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

_NEG_INF = -jnp.inf


def joint_top_k(
    key: PRNGKey,
    scores: ArrayLike,
    k: int,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
) -> Array:
    r"""Selects an ordered k-tuple in one ε-DP draw with the joint exponential mechanism.

    .. math::

        P(s) \propto \exp\Big(-\frac{\varepsilon}{2\Delta_u}
        \max_{i \le k}\big(c_{(i)} - c_{s_i}\big)\Big),

    over sequences ``s`` of k distinct outcomes, ``c_(i)`` the i-th largest
    score, ``Δ_u = sensitivity`` if ``monotonic`` else ``2 * sensitivity``.
    Sampled exactly by grouping sequences by the position and item where their
    error is attained (Gillenwater et al. 2022; see the module notes): one
    categorical draw over the k·n groups, then k - 1 uniform draws. Unlike
    :func:`jaxdp.top_k` (k peeling rounds at ε/k), the whole budget goes to one
    draw, which is much more accurate when the top counts are well separated
    from the rest.

    **Privacy.** ε-DP for add/remove neighbours (McSherry & Talwar 2007, Thm 6):
    if every score moves by at most Δ, then ``c_(i)`` (an order statistic) and
    ``c_{s_i}`` each move by at most Δ, so the error ``max_i(c_(i) - c_{s_i})``
    moves by at most 2Δ; if all scores move in the same direction
    (``monotonic``, e.g. counts when one user is added), both terms move the same
    way and the error moves by at most Δ. This is the paper's Lemma for counts
    (Δ = 1, monotonic: Δ_u = 1).

    **Finite precision.** Proven in ``SECURITY.md`` ("Finite precision: joint
    top-k") for the code as it computes: the errors are compared exactly (the
    grouping is that of the exact errors, ties included), each group's weight
    ``exp(-ε E/(2Δ_u)) × count`` is computed to within ``2 u_exp + 2u + τ``
    relative (``u = 2**-24``, ``τ < 0.01u`` for ``k ≤ 1000``; the count product as
    a double-float mantissa times an exact power of two, normalised by the row's
    largest weight) and drawn by the sound categorical kernel over the ``k n``
    groups, and the uniform choices inside the group use 64 random bits in exact
    integer arithmetic (relative bias ``≤ n 2**-64`` each). One draw is
    (ε', δ')-DP with ``ε' = ε_kernel(k n) + 4τ + 2.02 (k - 1) n 2**-64`` and
    ``δ' = δ_kernel(k n) + (1 + e**ε') k n 2**-122`` (groups below float32's normal
    range): in float32 ε' ≤ ε + 6.0e-6 for k = 10, n = 10**4, ε' ≤ ε + 7.0e-6
    and δ' ≤ 5.1e-11 for k = 10, n = 10**6, and ε' ≤ ε + 7.4e-6, δ' ≤ 5.8e-11 for
    k = 100, n = 10**6 (``jaxdp._joint_top_k.guarantee(n, k, ε)``); far smaller
    under ``jax.enable_x64``. The scale ``ε/(2Δ_u)`` is rounded down, so ε is never
    exceeded. Assumes scores whose differences are finite (``|s| < 2**127`` in
    float32); integer scores are shifted exactly by their row maximum, so gaps
    below ``2**24`` are exact.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      scores: ``[..., n, ...]`` real array; ``-inf`` is never selected.
      k: static int, ``1 <= k <= n``.
      epsilon: ε > 0 for the whole tuple; number or array broadcasting with the
        batch shape; may be traced.
      sensitivity: Δ > 0, the largest change of any score between neighbours;
        same rules.
      monotonic: static bool; see **Privacy**.
      shape: static draw shape with :func:`jax.random.categorical` semantics.
      axis: static int, the axis of outcomes.

    Returns:
      int32 array of ``shape + (k,)``: distinct indices along ``axis``, position
      ``i`` estimating the i-th largest score. Under tracing, invalid rows (NaN or
      +inf scores, fewer than k finite scores, ε or Δ not finite and > 0) give
      -1; ``checkify`` reports why.

    Raises:
      ValueError: bad ε, Δ, scores, ``shape``, ``axis`` or key; k not an int in
        [1, n]; ``monotonic`` not a bool; a concrete row with fewer than k
        finite scores.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.joint_top_k(jax.random.key(0), jnp.arange(10.0), 3, epsilon=1.0,
      ...                   sensitivity=1.0, shape=(100,)).shape
      (100, 3)

    References:
      J. Gillenwater, M. Joseph, A. Muñoz Medina and M. Ribero, `A Joint
      Exponential Mechanism for Differentially Private Top-k
      <https://arxiv.org/abs/2201.12333>`_, ICML 2022.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "joint_top_k"
    monotonic = _checks.boolean(monotonic, fn, "monotonic")
    key, scores, epsilon, sensitivity, shape, k = _top_k.top_k_args(
        fn, key, scores, k, epsilon, sensitivity, shape, axis
    )
    return _joint_top_k_impl(
        key, scores, epsilon, sensitivity, k=k, monotonic=monotonic, shape=shape
    )


# ----------------------------------------------------------------------------- constants

#: ``ln 2`` as an unevaluated sum ``hi + lo`` per dtype (``hi`` the nearest float).
_LN2 = {
    np.dtype(np.float32): (float.fromhex("0x1.62e43p-1"), float.fromhex("-0x1.05c61p-29")),
    np.dtype(np.float64): (
        float.fromhex("0x1.62e42fefa39efp-1"),
        float.fromhex("0x1.abc9e3b39803fp-56"),
    ),
}

#: Computed group weights are normalised so that the largest lies in
#: ``[2**-1, 2**1]`` (up to rounding); those below ``2**-UNDERFLOW_LOG2`` (float32;
#: :func:`underflow_log2` per dtype) may be off by more than the stated relative
#: error (subnormal or flushed to 0) and are counted in δ'.
UNDERFLOW_LOG2 = 124


def underflow_log2(dtype) -> int:
    """``-log2`` of the smallest normalised group weight computed to full relative precision."""
    return 1020 if np.dtype(dtype) == np.float64 else UNDERFLOW_LOG2


# ----------------------------------------------------------------------------- exact parts


def _exponent(h: Array) -> tuple[Array, Array]:
    """``(e, 2**-e)`` with ``h = m 2**e``, ``m`` in ``[1/2, 1)``, for positive normal ``h``
    whose exponent ``e`` lies in ``[-120, 120]`` (read from the bits; exact)."""
    if h.dtype == jnp.float64:
        word, shift, mask, bias = jnp.uint64, 52, 0x7FF, 1022
    else:
        word, shift, mask, bias = jnp.uint32, 23, 0xFF, 126
    bits = jax.lax.bitcast_convert_type(h, word)
    e = ((bits >> word(shift)) & word(mask)).astype(jnp.int32) - bias
    inv = jax.lax.bitcast_convert_type((bias + 1 - e).astype(word) << word(shift), h.dtype)
    return e, inv


def _count_as_pair(m: Array, n: int, dtype) -> tuple[Array, Array]:
    """The non-negative int32 ``m < 2**31`` as an exact double-float ``(hi, lo)``."""
    if np.dtype(dtype) == np.float64 or n < 2**24:
        return m.astype(dtype), jnp.zeros(m.shape, dtype)
    hi = (m & ~jnp.int32(0xFFF)).astype(dtype)  # <= 19 significant bits: exact
    return _tf.fast_two_sum(hi, (m & jnp.int32(0xFFF)).astype(dtype))


def _search(flat: Array, n: int, base: Array, cp: Array, e_hi: Array, e_lo: Array, strict):
    """``#{l : c_p - c_l < E}`` (``strict``) or ``<= E``, per query, compared exactly.

    ``flat`` holds the rows of descending scores ``c`` end to end; ``base`` is
    the query's row offset into it, ``cp`` its row's ``c_p``, ``(e_hi, e_lo)``
    the exact error ``E`` (a TwoSum pair). ``c_p - c_l`` is non-decreasing in
    ``l``, so the count is the length of the prefix where the comparison holds:
    a branch-free binary search in one ``fori_loop`` (``n.bit_length()`` steps,
    one gather each). ``c_p - c_l`` is formed exactly as a TwoSum pair at each
    step and compared with ``E`` lexicographically, which is exact for
    TwoSum pairs (round-to-nearest is monotone); an infinite difference (a
    ``-inf`` score) compares as ``+inf``.
    """
    steps = max(1, int(n).bit_length())

    def body(t, pos):
        stride = jnp.left_shift(jnp.int32(1), steps - 1 - t)
        cand = pos + stride
        c_l = jnp.take(flat, base + jnp.minimum(cand, n) - 1, mode="clip")
        d_hi, d_lo = _errors(cp, c_l)
        tie = jnp.where(strict, d_lo < e_lo, d_lo <= e_lo)
        below = (d_hi < e_hi) | ((d_hi == e_hi) & tie)
        return jnp.where((cand <= n) & below, cand, pos)

    zero = jnp.zeros(jnp.broadcast_shapes(base.shape, e_hi.shape), jnp.int32)
    zero = _tracing.varying_like(zero, flat, base, cp, e_hi, e_lo, strict)
    return jax.lax.fori_loop(0, steps, body, zero)


def _errors(a: Array, b: Array) -> tuple[Array, Array]:
    """``a - b`` exactly, as a TwoSum pair, for a finite ``a`` (a score among a row's
    top k) and a ``b`` that may be ``-inf``: ``(+inf, 0)`` then (``-inf`` where ``a``
    is ``-inf``, a row with fewer than k finite scores, which is invalid). The
    TwoSum runs on finite stand-ins, so it never computes ``inf - inf`` (checkify's
    nan_checks would report its NaN); a difference that overflows is ``+-inf`` with
    its low part set to 0."""
    finite = jnp.isfinite(a) & jnp.isfinite(b)
    zero = jnp.zeros_like(a)
    d_hi, d_lo = _tf.two_sum(jnp.where(finite, a, zero), -jnp.where(finite, b, zero))
    infinite = jnp.where(a == -jnp.inf, -jnp.inf, jnp.inf).astype(d_hi.dtype)
    d_hi = jnp.where(finite, d_hi, infinite)
    return d_hi, jnp.where(jnp.isfinite(d_hi), d_lo, jnp.zeros_like(d_lo))


#: The most positions whose counts one step of :func:`_count_products` searches at
#: once on a GPU (their products are then unrolled in the step).
MAX_COUNT_BLOCK = 64


def count_block(num_rows: int, k: int, n: int, platform: str | None = None) -> int:
    """Positions per step of :func:`_count_products`: 1 on CPU (one search a step);
    on a GPU as many as ``jaxdp._tuning.RACE_CHUNK`` values allow, up to
    :data:`MAX_COUNT_BLOCK`, so that ``k`` positions take ``k / per`` steps of the
    search's ``n.bit_length()`` rounds rather than ``k`` of them."""
    if _tuning.kind(platform) == "cpu":
        return 1
    return max(1, min(k, MAX_COUNT_BLOCK, _tuning.race_chunk(platform) // (num_rows * k * n)))


def _count_products(c_sorted: Array, e_hi: Array, e_lo: Array, *, k: int, per: int):
    """The groups' count products ``prod_p (|A_p| - p)`` ``(R, k, n)`` as a normalised
    double-float mantissa and an exponent, one position after the other (the same
    arithmetic for any ``per``); each step searches the counts of ``per`` positions
    at once (:func:`count_block`)."""
    num_rows, n = c_sorted.shape
    dtype = c_sorted.dtype
    flat = c_sorted.reshape(-1)
    base = (jnp.arange(num_rows, dtype=jnp.int32) * n)[:, None, None]
    pos_i = jnp.arange(k, dtype=jnp.int32)[None, :, None]

    def counts(ps: Array) -> Array:  # positions ps (per,): (per, R, k, n)
        p = ps[:, None, None, None]
        cp = jnp.take(c_sorted, jnp.minimum(ps, n - 1), axis=1).T[:, :, None, None]
        base_p = jnp.broadcast_to(base[None], (per, num_rows, 1, 1))
        count = _search(flat, n, base_p, cp, e_hi[None], e_lo[None], p < pos_i[None]) - p
        count = jnp.where(p == pos_i[None], 1, jnp.maximum(count, 0))
        return jnp.where(p < k, count, 1)  # padding positions: a factor 1

    def add_block(carry, b):
        mh, ml, x = carry
        block = counts(b * per + jnp.arange(per, dtype=jnp.int32))
        for j in range(per):
            fh, fl = _count_as_pair(block[j], n, dtype)
            mh, ml = _tf.dd_mul(mh, ml, fh, fl)
            e, inv = _exponent(jnp.where(mh > 0, mh, jnp.ones_like(mh)))
            mh, ml, x = mh * inv, ml * inv, x + e
        return (mh, ml, x), None

    one = jnp.ones(e_hi.shape, dtype)
    init = (one, jnp.zeros_like(one), jnp.zeros(e_hi.shape, jnp.int32))
    steps = jnp.arange(-(-k // per), dtype=jnp.int32)
    init = _tracing.carry_for(lambda carry: add_block(carry, steps[0])[0], init)  # shard_map
    return jax.lax.scan(add_block, init, steps)[0]


def group_weights(c_sorted: Array, scale: Array, k: int) -> tuple[Array, Array]:
    """Weights ``(R, k, n)`` of the groups ``(i, j)`` and the row exponents ``T`` ``(R,)``.

    ``c_sorted`` ``(R, n)``: each row's scores in descending order (``-inf``
    last); ``scale`` ``(R,)``: the (rounded down) ``ε / (2 Δ_u)``. The weight of
    group ``(i, j)`` is ``exp(-scale E_ij) N_ij 2**-T`` to a relative error
    bounded in ``SECURITY.md`` ("joint top-k"), where ``E_ij = c_i - c_j`` is
    exact and ``N_ij`` the exact number of sequences in the group:

    * the counts ``|A_p| - p`` come from exact comparisons (:func:`_search`);
    * their product is a double-float mantissa times an exact power of two
      ``2**X`` (renormalised after each factor, so nothing overflows);
    * ``-scale E = big + small`` exactly up to one rounding of ``u**2``
      (TwoSum for ``E``, TwoProduct for ``big = fl(E_hi scale)``), and ``big`` is
      combined *exactly* (TwoProduct, TwoSum) with ``(X - T) ln 2``: the one
      large ``exp`` sees the group's whole log-weight, in range, and everything
      else is a remainder of order ``u`` times the magnitudes, so the weight's
      error does not grow with ``scale E`` (as a plain float32 logit's
      ``2u |logit|`` does, and the count products make logits of several hundred
      relevant);
    * ``T = floor(max (X + (big + small) log2 e))`` over the row's nonempty
      groups, so the largest weight is within ``[2**-1, 2**1]`` (rounding aside).

    Empty groups, ``-inf`` items and overflowing errors get weight 0.
    """
    num_rows, n = c_sorted.shape
    dtype = c_sorted.dtype
    c_i = c_sorted[:, :k, None]  # (R, k, 1)
    c_j = c_sorted[:, None, :]  # (R, 1, n)
    e_hi, e_lo = _errors(c_i, c_j)  # (R, k, n)
    if k > 1:

        def plan(kind: str) -> int:
            return count_block(num_rows, k, n, kind)

        build = lambda per: partial(_count_products, k=k, per=per)  # noqa: E731
        mh, ml, x = _tuning.staged(plan, build, c_sorted, e_hi, e_lo)
    else:
        mh = jnp.ones(e_hi.shape, dtype)
        ml, x = jnp.zeros_like(mh), jnp.zeros(e_hi.shape, jnp.int32)
    e, inv = _exponent(mh)  # k == 1: mh == 1
    mh, ml, x = mh * inv, ml * inv, x + e

    # -scale E = big + small exactly, big = fl(d_hi scale) (TwoProduct).
    # A -inf item's error is +inf: it gets a finite stand-in here (its weight is 0,
    # `live` below), so the TwoProduct's split never computes inf - inf.
    d_hi = jnp.where(c_j > -jnp.inf, -e_hi, jnp.zeros_like(e_hi))
    d_lo = -e_lo
    d_hi, d_lo, c = _tf.balance(d_hi, d_lo, scale[:, None, None])  # no subnormal products
    big, big_lo = _tf.two_prod(d_hi, c)
    small = big_lo + d_lo * c
    # Weights below e**-(2**100) are 0 in any precision (counted in δ').
    live = (mh > 0) & (c_j > -jnp.inf) & (big > dtype.type(-(2.0**100)))
    xf = x.astype(dtype)
    approx = jnp.where(live, xf + big * dtype.type(math.log2(math.e)), -jnp.inf)
    top = jnp.max(approx, axis=(1, 2))
    t = jnp.floor(jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top)))
    s = jnp.where(live, xf - t[:, None, None], jnp.zeros_like(xf))  # an integer, exact
    ln2_hi, ln2_lo = _LN2[np.dtype(dtype)]
    p_hi, p_lo = _tf.two_prod(s, jnp.asarray(ln2_hi, dtype))  # s ln2_hi, exactly
    h, h_lo = _tf.two_sum(big, p_hi)  # big + s ln2_hi = h + h_lo, exactly
    safe_mh = jnp.where(live, mh, jnp.ones_like(mh))
    rest = (small + (h_lo + p_lo)) + (s * dtype.type(ln2_lo) + ml / safe_mh)
    # exp(rest) by a polynomial: XLA would merge two exponentials into exp(h + rest).
    # (dead groups' h may be large: exp on a stand-in, so that no inf * 0 is formed)
    w = jnp.exp(jnp.where(live, h, jnp.zeros_like(h))) * _tf.exp_small(rest) * mh
    return jnp.where(live, w, jnp.zeros_like(w)), t


def _mul_hi(a: Array, b: Array) -> tuple[Array, Array]:
    """``a b = hi 2**32 + lo`` for uint32 ``a, b``, exactly (16-bit halves)."""
    m16 = jnp.uint32(0xFFFF)
    a0, a1, b0, b1 = a & m16, a >> 16, b & m16, b >> 16
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> 16) + (p01 & m16) + (p10 & m16)
    hi = p11 + (p01 >> 16) + (p10 >> 16) + (mid >> 16)
    return hi, (mid << 16) | (p00 & m16)


def uniform_below(key: PRNGKey, m: Array) -> Array:
    """``floor(m X / 2**64)`` for a uniform 64-bit ``X``: int32 in ``[0, m)`` for
    ``1 <= m < 2**31``, each value with probability within ``2**-64`` of ``1/m``
    (exact integer arithmetic)."""
    k1, k2 = jax.random.split(key)
    x1 = jax.random.bits(k1, m.shape, jnp.uint32)
    x0 = jax.random.bits(k2, m.shape, jnp.uint32)
    mu = m.astype(jnp.uint32)
    h1, l1 = _mul_hi(mu, x1)
    h0, _ = _mul_hi(mu, x0)
    total = l1 + h0  # wraps when the 2**32 digit carries
    return (h1 + (total < l1).astype(jnp.uint32)).astype(jnp.int32)


@partial(jax.jit, static_argnames=("k", "monotonic", "shape"))
def _joint_top_k_impl(key, scores, epsilon, sensitivity, *, k, monotonic, shape):
    fn = "joint_top_k"
    scores = _logits.float_scores(scores)
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    debug_check(
        jnp.all(jnp.sum(scores > -jnp.inf, axis=-1) >= k),
        f"{fn}: every row of scores needs at least k={k} finite scores",
    )
    n = scores.shape[-1]
    dtype = scores.dtype
    batch = _rows.broadcast_batch(scores.shape[:-1], epsilon.shape, sensitivity.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    rows = math.prod(tail)
    if math.prod(shape) == 0:
        return jnp.zeros(shape + (k,), jnp.int32)
    valid = _logits.row_valid(jnp.max(scores, axis=-1), epsilon, sensitivity)
    valid = valid & (jnp.sum(scores > -jnp.inf, axis=-1) >= k)
    valid = jnp.broadcast_to(valid, tail).reshape(rows)

    c = _rows.flatten_rows(scores, tail)  # (R, n)
    order = jnp.argsort(-c, axis=-1, stable=True).astype(jnp.int32)
    c_sorted = jnp.take_along_axis(c, order, axis=-1)
    c_sorted = jnp.where(valid[:, None], c_sorted, jnp.zeros_like(c_sorted))
    delta_u = sensitivity if monotonic else 2 * sensitivity
    info = jnp.finfo(dtype)
    scale = jnp.clip((epsilon / (2 * delta_u)).astype(dtype), info.tiny, info.max)
    scale = _descent.scale_down(jnp.broadcast_to(scale, tail).reshape(rows))
    w, _ = group_weights(c_sorted, scale, k)  # (R, k, n)

    key_group, key_fill = jax.random.split(key)
    group, ok = _descent.sample(_threefry.fast_key(key_group), w.reshape(rows, k * n), num_lead)
    ok = jnp.broadcast_to(ok & valid, (num_lead, rows))
    gi, gj = group // n, group % n  # position of the max and its item (sorted index)
    flat = c_sorted.reshape(-1)
    base = jnp.broadcast_to(jnp.arange(rows, dtype=jnp.int32) * n, (num_lead, rows))
    e_hi, e_lo = _errors(jnp.take(flat, base + gi), jnp.take(flat, base + gj))
    big = jnp.int32(np.iinfo(np.int32).max)  # an empty slot of ``used``
    slots = jnp.arange(k, dtype=jnp.int32).reshape(1, 1, k)

    # |A_p| - p for every position at once (one search over (k, S, R); it does not
    # depend on the items placed), so the fill's k steps hold no loop.
    ps = jnp.arange(k, dtype=jnp.int32)[:, None, None]
    base_k = jnp.broadcast_to(base, (k,) + base.shape)
    cps = jnp.take(flat, base_k + ps)
    sizes = _search(flat, n, base_k, cps, e_hi[None], e_lo[None], ps < gi[None]) - ps

    def fill(used, xs):
        p, kp, size = xs
        r = uniform_below(kp, jnp.maximum(size, 1))
        # The r-th item of [0, |A_p|) not yet placed: ``used`` is sorted, and the
        # t-th placed item u_t has u_t - t unplaced items below it.
        item = r + jnp.sum(used - slots <= r[..., None], axis=-1, dtype=jnp.int32)
        here = jnp.where(p == gi, gj, item)
        new = jnp.where(p == gi, big, item)[..., None]
        before = jnp.concatenate(
            [jnp.full(used.shape[:-1] + (1,), -1, jnp.int32), used[..., :-1]], -1
        )
        used = jnp.where(used < new, used, jnp.where(before < new, new, before))
        return used, (here, (p == gi) | (size >= 1))

    used0 = jnp.concatenate(
        [gj[..., None], jnp.full((num_lead, rows, k - 1), big, jnp.int32)], axis=-1
    )
    keys = jax.random.split(key_fill, k)
    xs = (jnp.arange(k, dtype=jnp.int32), keys, sizes)
    used0 = _tracing.carry_for(lambda used: fill(used, jax.tree.map(lambda x: x[0], xs))[0], used0)
    _, (picked, ok_fill) = jax.lax.scan(fill, used0, xs)
    picked = jnp.moveaxis(picked, 0, -1)  # (S, R, k) sorted indices
    ok = ok & jnp.all(ok_fill, axis=0)
    pos = (jnp.arange(rows, dtype=jnp.int32) * n)[None, :, None] + jnp.clip(picked, 0, n - 1)
    out = jnp.take(order.reshape(-1), pos)
    out = jnp.where(ok[..., None], out, -1).astype(jnp.int32)
    return out.reshape(shape + (k,))


# ----------------------------------------------------------------------------- guarantee


def _relevant_logit(n: int, k: int, dtype) -> float:
    """``L``: the largest ``scale E`` of a group whose normalised weight is at least
    ``2**-underflow_log2(dtype)`` (its count is at most ``n**(k - 1)``, the top
    group's weight at least 1, the largest normalised weight at most ``2**1.01``)."""
    return (k - 1) * math.log(n) + (underflow_log2(dtype) + 1.01) * math.log(2)


def weight_error(n: int, k: int, dtype=np.float32) -> float:
    """Bound on ``|ln(w 2**T / W)|`` for the computed weight ``w`` of a group of exact
    weight ``W`` whose normalised weight ``W 2**-T`` is at least
    ``2**-underflow_log2(dtype)``: ``2 u_exp + 2u + tau`` (``u_exp = 4u``), with
    ``tau`` the rounding of the small remainder and of the count product
    (SECURITY.md, "joint top-k")."""
    u = float(np.finfo(dtype).eps) / 2
    big_l = _relevant_logit(n, k, dtype)
    h = (underflow_log2(dtype) + 2) * math.log(2)
    s = (k - 1) * math.log2(n) + 3
    ln2_lo = abs(_LN2[np.dtype(dtype)][1])
    tau = (u * u * (10 * big_l + 3 * h + 8 * k + 4) + 3 * u * s * ln2_lo) * (1 + 2.0**-20)
    return _descent.weight_error(dtype) + tau


def guarantee(n: int, k: int, epsilon: float, dtype=np.float32) -> tuple[float, float]:
    """The (ε', δ') of one draw of :func:`joint_top_k` for rows of ``n`` outcomes
    (SECURITY.md, "joint top-k"): the categorical kernel's bound over the ``k n``
    groups for weights given to ``10u`` (:func:`jaxdp._descent.guarantee` with
    ``recomputed=False``), plus ``4 tau`` for the weights' excess error over
    ``10u`` and ``2 beta`` for the uniform fill (``beta = 1.01 (k - 1) n 2**-64``); δ'
    adds ``(1 + e**ε') k n 2**-(underflow_log2 - 2)`` for the groups below the
    normal range."""
    eps_k, delta_k = _descent.guarantee(k * n, epsilon, dtype, recomputed=False)
    tau = weight_error(n, k, dtype) - _descent.weight_error(dtype)
    beta = 1.01 * (k - 1) * n * 2.0**-64
    eps_p = eps_k + 4 * tau + 2 * beta
    under = (1 + math.exp(min(eps_p, 700.0))) * k * n * 2.0 ** -(underflow_log2(dtype) - 2)
    return eps_p, delta_k + under
