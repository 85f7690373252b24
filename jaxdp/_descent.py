"""The sound categorical kernel: weights exact to a few ulp, drawn by a sorted descent
(few draws per row), an alias table (many, :mod:`jaxdp._alias`) or the hybrid of
the two (an alias table over one level of the descent, then the levels below it:
:func:`layout`, :func:`hybrid_depth`).

Every finite-range draw of jaxdp that is not a noisy argmax goes through
:func:`sample`: ``exponential`` (``"inverse_cdf"`` and ``"auto"``),
:func:`jaxdp._sampling.categorical` (joint quantiles, joint top-k, the base
measure), the interval choice of the continuous mechanisms. Its law is proven
in ``SECURITY.md`` ("The categorical kernel"); this docstring says how it is
computed.

Weights. For scores ``s`` with row maximum ``m`` and scale ``c`` (rounded
down, :func:`scale_down`), the weight of ``r`` is ``exp((s_r - m) c)``. A
plain float32 logit ``fl(fl(s_r - m) c)`` is off by up to ``2u |logit|``
(``u = 2**-24``): 1e-5 at a logit of -80, which alone would spend the whole
finite-precision budget. :func:`weights` instead computes ``s_r - m`` exactly as
a pair (TwoSum), splits it and ``c`` into 12-bit halves (by masking mantissa
bits: immune to FMA contraction), takes the exponential of the one large
exact product and of the small remainder separately (the latter by a
polynomial, :func:`jaxdp._twofloat.exp_small`: XLA's simplifier rewrites a
product of two ``exp`` into the ``exp`` of the rounded sum), and multiplies: the
weight is ``exp(logit) (1 + eta)`` with ``|eta| <= 2 u_exp + 2u`` *whatever the
logit*, where ``u_exp`` is the backend's ``exp`` error, bounded by
:data:`EXP_ERROR_U` on every backend.

Descent. Weights are grouped in blocks of :data:`K` = 8; a block's mass is a
double-float (hi, lo) pair summed by one variadic reduction whose combiner is
the double-float addition (error about ``K u**2`` in any combining order);
blocks of blocks likewise, up to a top of at most ``K`` entries. A draw walks
down: at each node it gathers the ``K`` children,
**sorts them ascending**, accumulates their double-float running sums, draws a
fresh 64-bit uniform ``U`` and returns the first child whose running sum
exceeds ``U * total`` (a double-float product, TwoProduct by split halves).
Given its parent, each child ``i`` is then chosen with probability
``m_i / sum(m)`` up to

* the uniform's grid ``2**-64`` (exact as a double-float while ``U < 2**-16``,
  relative ``2**-48`` above), which the ascending order makes *relative* to each
  child's own mass: a child's boundaries lie below ``(i + 1) m_i``, so its
  probability is off by at most ``2**-64 / share + 2**-43`` relative;
* double-float rounding of the sums and the product, about ``2**-44`` relative.

So every child whose share of its parent is at least ``2**-40`` is drawn with
relative error below ``2**-23``, *however small the child and however large its
siblings* (the "dominant outcome followed by tiny ones" that a float32 prefix
sum erases). The ratio of a node's stored mass to the sum of its children is
1 up to ``u**2``, so the levels telescope: the draw's law is
``w_r / sum(w)`` times a factor within ``exp(+-(L + 1) 2**-23)`` for ``L + 1``
levels, except on the children of share below ``2**-40`` (at most ``(K - 1)
2**-40`` of mass per level, counted in δ').

Cost. Per row: the weights and one double-float reduction per level.
Per draw and level: ``K`` gathers, a ``K``-element sorting network and one
64-bit uniform. ``K = 8`` rather than 16: the per-draw loop body (the sorting
network, 19 compare-exchanges against 63, and the running sums) is what XLA
spends most of its compile time on, and the narrower nodes compile in about
0.7 of the time at the same run time (more levels, each cheaper); the bounds
below also tighten (fewer siblings per node).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _alias, _logits, _random, _tracing, _tuning
from . import _twofloat as _tf
from ._twofloat import split as _split
from ._twofloat import two_sum as _two_sum
from ._typing import Array, PRNGKey

#: Children per node of the descent (enters the guarantee: see :func:`guarantee`).
K = 8

#: A child's share of its parent below which its relative error is not bounded
#: by the pure part of the guarantee (it is counted in δ' instead).
SHARE_FLOOR = 2.0**-40

#: Relative error of the backend's ``exp``, in units of the dtype's unit roundoff
#: ``u``, that every bound on the weights assumes (``u_exp``): 2 ulp = 4u, the bound
#: CUDA documents for ``expf`` and ``exp`` (CUDA C++ Programming Guide, "Mathematical
#: Functions": maximum ulp error), which XLA:GPU calls. ``tests/test_descent.py``
#: measures it on the backend it runs on: 1.39u on XLA:CPU (jax 0.10.2) and 2.49u
#: on XLA:GPU (H100, jax 0.11.2), which the earlier assumption of 2u did not cover.
#: The noisy-max race assumed 4u already (``c_exp`` in SECURITY.md).
EXP_ERROR_U = 4.0


def weight_error(dtype=np.float32) -> float:
    """Relative error bound of one computed weight, ``2 u_exp + 2u`` (:func:`weights`)."""
    u = float(np.finfo(dtype).eps) / 2
    return (2 * EXP_ERROR_U + 2) * u


# ----------------------------------------------------------------------------- double-float


# ----------------------------------------------------------------------------- weights


def scale_down(scale: Array) -> Array:
    """The scale times ``1 - 8u``: at most the exact ε/(2Δ) whatever the rounding of
    ε, Δ (to the compute dtype) and of their quotient (three roundings, each
    within ``u``), so the implemented mechanism never uses a larger ε than asked.
    """
    u = np.finfo(scale.dtype).eps / 2
    return scale * scale.dtype.type(1 - 8 * u)


def weights(scores: Array, row_max: Array, scale: Array, low: Array | None = None) -> Array:
    """``exp((scores - row_max) * scale)`` with relative error ``2 u_exp + 2u`` at any logit.

    ``low`` (float scores only): the scores' double-float low parts, so that the
    weights are those of ``scores + low`` (to within the same error: ``low`` joins
    the exact difference's own low part, at most ``2u`` of the logit's size).

    ``scores`` ``(..., n)``, float or integer (then ``row_max`` is the integer row
    maximum: the difference is the exact integer gap, :func:`jaxdp._logits.difference`);
    ``row_max`` and ``scale`` broadcast against the batch (``scale`` finite and
    > 0, ``row_max`` finite for a valid row). ``-inf`` scores give weight 0; the
    row maximum gives exactly 1.
    """
    scale = scale[..., None]
    # A -inf score's TwoSum computes -inf - -inf: its NaN is masked below, but
    # checkify's nan_checks reports it. A finite stand-in would avoid it, but then
    # the mask needs its own compare on the scores, and each pair tried cost a hot
    # fusion: a select on the row maximum 19% of W2 (10**4 rows of 10**3), a maximum
    # with the lowest float 45% of C2's vmap over an ε grid (XLA:CPU, 2026-11-28).
    # So the false positive stays here (README).
    d_hi, d_lo = _logits.difference(scores, row_max[..., None])  # scores - max, exactly
    # Weight 0 where the difference is -inf: a -inf score, or a float difference that
    # overflowed (scores spanning more than float32's range: its weight is below
    # e**-(scale 3.4e38), 0 unless scale < 3e-37), whose TwoSum and split give NaN.
    # Read before `balance`, which clips the gap (to a finite one) at huge scales.
    # Integer gaps are never -inf, but the select stays: it keeps the weights one
    # fusion on XLA:CPU, which otherwise hands the exp to a YNNPACK fusion and
    # writes the gap and its split halves to memory.
    dead = d_hi == -jnp.inf
    if low is not None:
        d_lo = d_lo + low
    d_hi, d_lo, scale = _tf.balance(d_hi, d_lo, scale)  # no subnormal partial product
    dh, dl = _split(d_hi)
    ch, cl = _split(scale)
    big = dh * ch  # exact: 12 x 12 significant bits
    # exp(small) by a polynomial, not jnp.exp: XLA's simplifier would merge the two
    # exponentials into exp(big + small), rounding the sum (_tf.exp_small).
    small = (dh * cl + dl * ch + dl * cl) + d_lo * scale
    w = jnp.exp(big) * _tf.exp_small(small)
    return jnp.where(dead, jnp.zeros_like(w), w)


# ----------------------------------------------------------------------------- uniforms


def _uniform_dd(bits: tuple[Array, Array], dtype) -> tuple[Array, Array]:
    """``(X + 1/2) 2**-64`` for a uniform 64-bit ``X``, as a double-float pair.

    Exact while ``X < 2**48`` (float32) and rounded to 48 bits (relative) above;
    every value is in (0, 1). ``X`` is ``bits``, one threefry block's two words
    (:func:`jaxdp._random.bits64`): one hash a uniform, not two.
    """
    w1, w2 = bits
    if np.dtype(dtype) == np.float64:
        x = (w1.astype(jnp.uint64) << np.uint64(32)) | w2.astype(jnp.uint64)
        hi = (x >> np.uint64(11)).astype(jnp.float64) * 2.0**-53
        lo = ((x & np.uint64(2047)).astype(jnp.float64) + 0.5) * 2.0**-64
        return _tf.fast_two_sum(hi, lo)
    f32 = jnp.float32
    a = (w1 >> np.uint32(8)).astype(f32) * f32(2.0**-24)  # top 24 bits
    b = (((w1 & np.uint32(0xFF)) << np.uint32(16)) | (w2 >> np.uint32(16))).astype(f32)
    c = (w2 & np.uint32(0xFFFF)).astype(f32) + f32(0.5)
    hi, lo = _two_sum(b * f32(2.0**-48), c * f32(2.0**-64))
    return _tf.dd_add(a, jnp.zeros_like(a), hi, lo)


# ----------------------------------------------------------------------------- tables


def _pad_to(x: Array, size: int) -> Array:
    pad = size - x.shape[-1]
    return x if pad == 0 else jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])


def _block_sums(hi: Array, lo: Array) -> tuple[Array, Array]:
    """Double-float sums of consecutive blocks of :data:`K` (last axis a multiple of
    ``K``), within about ``K u**2`` of exact (:func:`jaxdp._twofloat.dd_sum`)."""
    shape = hi.shape[:-1] + (hi.shape[-1] // K, K)
    return _tf.dd_sum(hi.reshape(shape), lo.reshape(shape), hi.ndim)


def level_sizes(n: int) -> list[int]:
    """Padded widths of the levels, leaves first; the last has at most ``K`` entries."""
    sizes = [max(K, -(-n // K) * K)]
    while sizes[-1] > K:
        sizes.append(max(K, -(-(sizes[-1] // K) // K) * K))
    return sizes


def num_levels(n: int) -> int:
    """Selections per draw for rows of ``n`` outcomes."""
    return len(level_sizes(n))


def _leaf_block_sums(w_of: Callable[[slice], Array], n: int, descent: bool = False) -> Array:
    """Float32 sums of the leaves' blocks of :data:`K`, ``w_of(cols)`` giving the
    weights of columns ``cols``, with the weights fused into the pass that sums
    them, so that the ``(R, n)`` weights are never written to memory.

    Three formulations of the same sums (each block's ``K`` non-negative terms
    added in some order, within ``(K - 1) u`` of exact in any order). Large
    batches (:func:`jaxdp._tuning.strided_block_sums`, from the number of rows,
    ``n`` and whether the call takes the descent: ``descent``) add the ``K``
    strided slices of the lanes left to right (one elementwise fusion over the
    blocks, which XLA:CPU vectorises and splits).
    Else, where :data:`jaxdp._tuning.DOT_BLOCK_SUMS` says so, the full blocks
    are multiplied by a vector of ones (:func:`_dot_block_sums`); else one
    strided ``reduce_window`` (padding the last block inside the reduction, which
    XLA:CPU emits as a loop of ``K`` per block). Under ``vmap`` the rows
    counted are the batch's (:func:`_leaf_sums_for`), so a ``vmap`` over rows sums
    as the same rows in one call do.
    """
    m = n - n % K
    if 0 < m < n:
        # The full blocks' and the partial block's weights as two expressions (the
        # same elementwise values): from one, XLA:CPU computed the exponentials of
        # the whole row in a fusion of their own, shared by the product and the
        # last lanes. Two: 0.32 of the call's time for one row of 10**6 + 3 drawn
        # once, 0.52-0.78 for 10**5 + 3 drawn 1 to 10**4 times, 0.95-1.00 elsewhere
        # (benchmarks/results/cpu-2core-amd-epyc/layout-one-row/partial_block_weights.txt).
        w = jnp.concatenate([w_of(slice(0, m)), w_of(slice(m, n))], axis=-1)
    else:
        w = w_of(slice(0, n))
    return _leaf_sums_for(math.prod(w.shape[:-1]), descent)(w)


@functools.cache
def _counting_rows(
    body: Callable[..., Array], num_rows: int, *args: Any
) -> Callable[[Array], Array]:
    """``x -> body(x, num_rows, *args)`` for ``x`` making ``num_rows`` rows in all, as
    a :func:`jax.custom_batching.custom_vmap` function whose batching rule
    multiplies ``num_rows`` by the batch's size, at every level of nested ``vmap``s,
    so that a ``vmap`` over rows is treated as the same rows in one call (its
    inputs carry no gradient: the kernels stop it first)."""

    @jax.custom_batching.custom_vmap
    def fn(x: Array) -> Array:
        return body(x, num_rows, *args)

    @fn.def_vmap
    def _rule(axis_size: int, in_batched: list[bool], x: Array) -> tuple[Array, bool]:
        (batched,) = in_batched
        rows = num_rows * axis_size if batched else num_rows
        with _tracing.x64_for(x):
            return _counting_rows(body, rows, *args)(x), batched

    return fn


def _block_sums_of(w: Array, num_rows: int, descent: bool) -> Array:
    """The leaves' block sums of weights ``(..., n)`` making ``num_rows`` rows in all,
    by the formulation :func:`jaxdp._tuning.block_sums_by` picks."""
    n = w.shape[-1]
    how = _tuning.block_sums_by(num_rows, n, descent=descent)
    if how == "strided":
        return functools.reduce(jnp.add, [w[..., j::K] for j in range(K)])
    if how == "dot":
        return _dot_block_sums(w)
    pad = -(-n // K) * K - n
    dims = (1,) * (w.ndim - 1) + (K,)
    padding = [(0, 0)] * (w.ndim - 1) + [(0, pad)]
    return jax.lax.reduce_window(w, jnp.zeros((), w.dtype), jax.lax.add, dims, dims, padding)


def _leaf_sums_for(num_rows: int, descent: bool = False) -> Callable[[Array], Array]:
    """The leaves' block sums of weights ``(..., n)`` making ``num_rows`` rows in all
    (:func:`_block_sums_of`), a ``vmap`` counting its batch's rows (:func:`_counting_rows`)."""
    return _counting_rows(_block_sums_of, num_rows, descent)


def _dot_block_sums(w: Array) -> Array:
    """The blocks' sums of ``(..., n)`` weights as a product of the ``(..., n // K, K)``
    full blocks with a vector of ones (``HIGHEST`` precision: float32 accumulation
    wherever the product runs), the last partial block, if any, added lane by lane."""
    n = w.shape[-1]
    m = n - n % K
    full = w[..., :m].reshape(w.shape[:-1] + (m // K, K))
    ones = jnp.ones(K, w.dtype)
    sums = jnp.einsum("...k,k->...", full, ones, precision=jax.lax.Precision.HIGHEST)
    if m == n:
        return sums
    tail = functools.reduce(jnp.add, [w[..., j] for j in range(m, n)])
    return jnp.concatenate([sums, tail[..., None]], axis=-1)


def level_counts(n: int) -> list[int]:
    """Nodes per level, leaves first, without the padding of :func:`level_sizes`."""
    counts = [n]
    for _ in level_sizes(n)[1:]:
        counts.append(-(-counts[-1] // K))
    return counts


def _tables(
    leaves: Array, blocks: Array, n: int, levels: int | None = None
) -> list[tuple[Array, Array]]:
    """Tables ``(hi, lo)`` per level (the first ``levels``; all by default): the
    leaves (taken as given; their low parts are 0 and never read), their blocks'
    float32 sums ``blocks`` (from :func:`_leaf_block_sums`), then double-float sums
    of blocks of blocks.

    The leaves' blocks are summed in plain float32, fused into the pass that
    computes the weights (which XLA:CPU vectorises): ``K`` non-negative terms in
    any order are within ``(K - 1) u`` of their sum, an error :func:`guarantee` counts
    once. Above them the tables are small and summed in double-float.
    """
    sizes = level_sizes(n)[:levels]
    tables = [(leaves, jnp.zeros((), leaves.dtype))]
    if len(sizes) > 1:
        h = _pad_to(blocks, sizes[1])
        tables.append((h, jnp.zeros_like(h)))
    for size in sizes[2:]:
        h, lo = _block_sums(*tables[-1])
        tables.append((_pad_to(h, size), _pad_to(lo, size)))
    return tables


# ----------------------------------------------------------------------------- descent


def _network(n: int) -> list[tuple[int, int]]:
    """Batcher's odd-even merge sort: compare-exchange pairs sorting ``n`` (a power of 2)."""
    pairs: list[tuple[int, int]] = []

    def merge(lo: int, size: int, r: int) -> None:
        step = 2 * r
        if step < size:
            merge(lo, size, step)
            merge(lo + r, size, step)
            pairs.extend((i, i + r) for i in range(lo + r, lo + size - r, step))
        else:
            pairs.append((lo, lo + r))

    def sort(lo: int, size: int) -> None:
        if size > 1:
            half = size // 2
            sort(lo, half)
            sort(lo + half, half)
            merge(lo, size, 1)

    sort(0, n)
    return pairs


_NETWORK = _network(K)


def _sort_lanes(hi: list, lo: list | None, idx: list) -> None:
    """Sorts the lanes ascending by double-float value, in place (elementwise ops);
    by float value when ``lo`` is None (low parts all 0)."""
    for a, b in _NETWORK:
        if lo is None:
            swap = hi[b] < hi[a]
        else:
            swap = (hi[b] < hi[a]) | ((hi[b] == hi[a]) & (lo[b] < lo[a]))
        for lanes in (hi, idx) if lo is None else (hi, lo, idx):
            x, y = lanes[a], lanes[b]
            lanes[a], lanes[b] = jnp.where(swap, y, x), jnp.where(swap, x, y)


#: Nodes of the descent below this total (the row's largest weight is 1) are drawn
#: without the level's 2u bound (:func:`_choose`); ``2**-916`` in float64.
TINY_NODE = 2.0**-78


def _choose(bits: tuple[Array, Array], hi: list, lo: list | None) -> Array:
    """Index of the child drawn among :data:`K` lanes of non-negative double-float masses.

    Sorted ascending, accumulated, compared with a 64-bit uniform times the
    total; never a child of mass 0 while one is positive. A node whose total is
    below :data:`TINY_NODE` of the row's largest weight has subnormal partial
    products (flushed to 0 by XLA): its children are then drawn to about 300u
    rather than 2u, which :func:`guarantee` counts in δ' (every outcome below such
    a node has probability below ``TINY_NODE``). ``lo`` None: the masses
    are plain floats (low parts 0), which the sort skips: the same draws, with
    about 100 fewer operations per choice.
    """
    idx = [jnp.full(hi[0].shape, j, jnp.int32) for j in range(K)]
    _sort_lanes(hi, lo, idx)
    low_parts = [jnp.zeros_like(hi[0])] * K if lo is None else lo
    cum_h, cum_l = [hi[0]], [low_parts[0]]
    for j in range(1, K):
        h, low = _tf.dd_add(cum_h[-1], cum_l[-1], hi[j], low_parts[j])
        cum_h.append(h)
        cum_l.append(low)
    uh, ul = _uniform_dd(bits, hi[0].dtype)
    vh, vl = _tf.dd_mul(uh, ul, cum_h[-1], cum_l[-1])
    chosen = idx[K - 1]  # v >= total only by rounding: the largest child
    for j in reversed(range(K - 1)):
        chosen = jnp.where(_tf.dd_le(cum_h[j], cum_l[j], vh, vl), chosen, idx[j])
    return chosen


def descend(
    key: PRNGKey,
    tables: list[tuple[Array, Array]],
    num_draws: int,
    leaf_weights: Callable[[Array, Array], Array] | None = None,
    start: Array | None = None,
) -> Array:
    """``(num_draws, R)`` indices drawn with probability ∝ the level-0 weights.

    ``leaf_weights(block, rows)``, when given, turns the gathered level-0 entries
    (then scores, not weights) of shape ``walk + (K,)``, of the rows ``rows`` of
    shape ``walk`` (``(num_draws * R, 1)`` when the draws are walked flat, else
    ``(num_draws, R)``), into their weights: so that the ``(R, n)`` weights are
    never written to memory.

    ``start`` ``(num_draws, R)``, when given, are the nodes the draws start from,
    one level above the top table (the hybrid layout: blocks drawn from an alias
    table, then ``tables = [leaves]``); without it every draw starts at the root.

    The levels run in one loop (a ``lax.scan`` over the levels, top first),
    whose carry ``node`` is materialised at every level: unrolled, XLA:CPU duplicated each level's
    elementwise choice into the next level's gathers and into every consumer of
    the result (``O(L**2)`` copies of the sorting network, and compile times of
    tens of seconds); ``optimization_barrier`` is dropped there. Levels differ in
    width, so the body picks its level's gather with ``lax.switch``.
    """
    num_rows = tables[0][0].shape[0]
    levels = len(tables)
    # A level's uniforms: stream t of the key's words for threefry keys, else the
    # t-th of split keys (jaxdp._random.streams). Streams need no split keys, whose
    # (batch, levels, 2) array a vmap over keys transposed for the scan.
    xs, level_bits = _random.streams(key, levels, num_draws * num_rows)
    # Below _tuning.FLAT_BELOW_ROWS rows (any, for the hybrid) the draws are walked
    # flat, ``(num_draws * R, 1)`` in row-major order: the same uniforms, so the
    # same draws, as the ``(num_draws, R)`` walk, but without a minor axis of ``R``
    # rows, over which XLA:CPU emitted each level's choice as a loop of ``R`` lanes
    # per draw.
    size = num_draws * num_rows
    flat_below = _tuning.FLAT_BELOW_ROWS[_tuning.kind()]
    walk_flat = num_rows < flat_below["descent" if start is None else "hybrid"]
    # Slices of K for one row, when the walk has two levels or more (_tuning).
    block_gather = levels > 1 and num_rows <= _tuning.BLOCK_GATHER_MAX_ROWS[_tuning.kind()]
    flat = (size, 1) if walk_flat else (num_draws, num_rows)
    rows = jax.lax.broadcasted_iota(jnp.int32, (num_draws, num_rows), 1).reshape(flat)
    lanes = jnp.arange(K, dtype=jnp.int32).reshape(1, 1, K)

    def gather(level: int, node: Array) -> tuple[Array, Array]:
        hi, lo = tables[level]
        if hi.shape[-1] % K == 0 and block_gather:  # one gather of K-wide slices
            block_h = _alias.take_blocks(hi, rows, node, K)
            if level == 0 and leaf_weights is not None:
                block_h = leaf_weights(block_h, rows)
            if level <= 1:  # the leaves' and the block sums' low parts are 0
                return block_h, jnp.zeros_like(block_h)
            return block_h, _alias.take_blocks(lo, rows, node, K)
        # One gather of K lanes per table: a single producer, rather than K small
        # gathers that XLA fuses into (and recomputes in) each consumer.
        col = (node * K)[..., None] + lanes
        row = rows[..., None]
        if level == 0 and leaf_weights is not None:
            # Unpadded scores (a pad would copy them): lanes past the row are 0.
            inside = col < hi.shape[-1]
            block = _alias.take_rows(hi, row, jnp.where(inside, col, 0), clip=False)
            block_h = jnp.where(inside, leaf_weights(block, rows), 0)
            if levels == 1 and hi.shape[-1] % K:  # see _lone_level_weights
                block_h = _lone_level_weights(num_rows)(block_h)
            return block_h, jnp.zeros_like(block_h)
        block_h = _alias.take_rows(hi, row, col, clip=False)
        if level == 0:  # the leaves' low parts are exactly 0: not a loop operand
            return block_h, jnp.zeros_like(block_h)
        if level == 1:  # float32 block sums: low parts 0 too
            return block_h, jnp.zeros_like(block_h)
        return block_h, _alias.take_rows(lo, row, col, clip=False)

    branches = [functools.partial(gather, level) for level in reversed(range(levels))]
    # Levels 0 and 1 hold plain floats: when no other level is walked, the choice
    # skips the low parts (the same draws, cheaper).
    plain = levels <= 2

    def body(t: Array, x: Array, node: Array) -> Array:
        block_h, block_l = jax.lax.switch(t, branches, node)
        lanes_l = None if plain else [block_l[..., j] for j in range(K)]
        child = _choose(level_bits(x, node.shape), [block_h[..., j] for j in range(K)], lanes_l)
        return node * K + child

    # Every level, the top included, runs in the loop: one copy of the sorting
    # network in the program (a top level unrolled before the loop doubled the
    # compile time). The carry starts at the root as a value computed from the
    # tables and the keys, so that under shard_map it varies like the body's
    # output.
    if start is None:
        top = tables[-1][0][:, 0]
        word = jax.random.key_data(key).ravel()[0]
        root = jnp.where(top == top, 0, 0) + jnp.where(word == word, 0, 0)
        node = jnp.broadcast_to(root.astype(jnp.int32), (num_draws, num_rows)).reshape(flat)
    else:
        node = start.reshape(flat)
        if num_rows > 1:
            # The hybrid's first nodes into a buffer of their own on CPU: fused into
            # the walk, the alias table's draws (``(num_draws, R)``) made it several
            # times slower for 2, 4 or 8 rows (and not for 3, 6 or 12).
            node = _own_buffer_on_cpu(node)
    node = jax.lax.scan(
        lambda node, tx: (body(tx[0], tx[1], node), None), node, (jnp.arange(levels), xs)
    )[0]
    if num_rows > 1 and levels == 1:
        # The draws into a buffer of their own on CPU: else XLA:CPU fuses a lone
        # level's choice (the depth-1 hybrid) into the consumers of the
        # ``(num_draws, R)`` result, the short minor axis again.
        node = _own_buffer_on_cpu(node)
    return node.reshape(num_draws, num_rows)


def _lone_level_weights(num_rows: int) -> Callable[[Array], Array]:
    """The lane weights of a walk of one level (the depth-1 hybrid) over rows whose
    last block is partial, for ``num_rows`` rows in all: for one row, computed once
    into a buffer of their own on CPU; else returned as they are. Unmaterialised,
    XLA:CPU fused the lanes (their gather, the check against the row's end and
    their weights) into the consumers of the draws and recomputed them there
    (it folds the check away when the row is a multiple of :data:`K`, and the
    recomputation with it). The same values either way, so the same draws. CPU
    (2-core AMD EPYC, ``benchmarks/results/cpu-2core-amd-epyc/layout-one-row/
    lone_level.txt``): 0.48-0.75 of the time for one row of 1003, 1500 and 2047
    outcomes drawn 512 to 4000 times, 0.99-1.01 where nothing changes. Several
    rows, and ``vmap``s over rows (1.30-1.32 when they materialised too), keep
    the fused lanes: a ``vmap`` counts its batch's rows (:func:`_counting_rows`;
    0.99-1.01 under ``vmap``s over 4 and 12 rows)."""
    return _counting_rows(_lone_weights, num_rows)


def _lone_weights(w: Array, num_rows: int) -> Array:
    """:func:`_lone_level_weights`'s values: materialised on CPU for one row."""
    if num_rows != 1:
        return w

    def materialise(w: Array) -> Array:
        return _alias._materialise_floats(w)[0]

    return jax.lax.platform_dependent(w, cpu=materialise, default=lambda w: w)


def _own_buffer_on_cpu(x: Array) -> Array:
    """Int32 ``x`` computed once, into a buffer of its own, on CPU
    (:func:`jaxdp._alias._materialise`); unchanged on other platforms."""

    def materialise(x: Array) -> Array:
        (bits,) = _alias._materialise(jax.lax.bitcast_convert_type(x, jnp.uint32))
        return jax.lax.bitcast_convert_type(bits, jnp.int32)

    return jax.lax.platform_dependent(x, cpu=materialise, default=lambda x: x)


def layout(n: int, num_draws: int, num_rows: int = 1) -> str:
    """How :func:`sample` draws ``num_draws`` per row of ``n`` (``num_rows`` rows):
    :func:`jaxdp._tuning.layout`.

    * ``"descent"``: ``O(n)`` per row, then per draw one ``K``-lane choice per level;
    * ``"alias"``: an alias table over the ``N = 2**b >= n`` outcomes
      (:mod:`jaxdp._alias`: ``O(N log N)`` per row, ``O(1)`` per draw);
    * ``"hybrid"``: an alias table over the leaves' blocks of ``K`` (a ``K``-th of
      the table), then the descent's last level within the drawn block; or, at
      depth ``j >= 2`` (:func:`hybrid_depth`), over level ``j`` of the descent,
      then its ``j`` levels below the drawn node.
    """
    return _tuning.layout(n, num_draws, num_rows=num_rows)


def _sample_tree(
    key: PRNGKey,
    leaves: Array,
    blocks: Array,
    n: int,
    num_draws: int,
    depth: int,
    leaf_weights: Callable[[Array, Array], Array] | None = None,
) -> tuple[Array, Array]:
    """The descent (``depth`` 0) or the hybrid layout of that depth over ``leaves``
    (weights, or scores turned into weights by ``leaf_weights``) and their block sums.

    The hybrid draws a node of level ``depth`` from an alias table of the level's
    masses (whose build tells the row's validity), then walks the descent's
    ``depth`` lower levels from it, with a key of its own. Level 1 is the float32
    block sums; a higher level's masses are its double-float sums' high words
    (within ``u`` of them: :func:`guarantee`).
    """
    if depth == 0:
        idx = descend(key, _tables(leaves, blocks, n), num_draws, leaf_weights)
        total = jnp.sum(blocks, axis=-1)  # any sum tells a positive, finite row
        ok = jnp.isfinite(total) & (total > 0)
        return jnp.minimum(idx, n - 1), ok
    tables = _tables(leaves, blocks, n, depth + 1)
    # The level's nodes unpadded: the table's build pads to its own width.
    top = tables[depth][0][:, : level_counts(n)[depth]]
    key_top, key_down = jax.random.split(key)
    node, ok = _alias.sample(key_top, top, num_draws)
    idx = descend(key_down, tables[:depth], num_draws, leaf_weights, start=node)
    return jnp.minimum(idx, n - 1), ok


def hybrid_depth(n: int, num_draws: int, num_rows: int = 1) -> int:
    """Levels of the descent below the hybrid's table (0 unless :func:`layout` is
    ``"hybrid"``): :func:`jaxdp._tuning.hybrid_depth`."""
    return _tuning.hybrid_depth(n, num_draws, num_rows=num_rows)


def _plan(n: int, num_draws: int, num_rows: int, dtype: Any) -> Callable[[str], tuple[str, int]]:
    """The (layout, hybrid depth) on each platform kind, for :func:`jaxdp._tuning.staged`:
    the rules differ between kinds (the descent takes many more draws on a GPU), so
    the program that runs is the one of the platform it is compiled for.

    Float64 weights always take the descent: the alias table's fixed point (its
    grid's imbalance, up to ``2**(2b - 62)`` relative) and double-float32 total
    are far coarser than the float64 descent, and :func:`guarantee` states the
    descent's bound for float64."""
    if np.dtype(dtype) == np.float64:
        return lambda kind: ("descent", 0)

    def plan(kind: str) -> tuple[str, int]:
        how = _tuning.layout(n, num_draws, kind, num_rows)
        return how, _tuning.hybrid_depth(n, num_draws, kind, num_rows)

    return plan


#: The kernels index a row's entries as ``row * width + column`` in int32.
MAX_ENTRIES = 2**31 - 1


def _check_size(num_rows: int, n: int) -> None:
    """A clear error for a batch the int32 flat indices cannot address (a shape, not
    data: raised at trace time, the same for every dataset of that shape)."""
    if num_rows * (level_sizes(n)[0] + K) > MAX_ENTRIES:
        raise ValueError(
            f"scores of {num_rows} rows x {n} outcomes ({num_rows * n:.3g} entries) are "
            f"more than the categorical kernel addresses (2**31 - 1, padding "
            f"included): split the rows (or the draws' batch) into several calls"
        )


def sample(key: PRNGKey, w: Array, num_draws: int) -> tuple[Array, Array]:
    """Draws for weights ``w`` ``(R, n)``: ``(num_draws, R)`` int32 indices and the
    rows' validity (a positive, finite total).

    The layout (descent, alias table or hybrid) follows :func:`layout` for the
    platform the program is compiled for; each is sound and :func:`guarantee`
    bounds all three.
    """
    num_rows, n = w.shape
    _check_size(num_rows, n)
    w = _logits.no_gradient(w)

    def build(plan: tuple[str, int]) -> Callable[[PRNGKey, Array], tuple[Array, Array]]:
        how, depth = plan

        def run(key: PRNGKey, w: Array) -> tuple[Array, Array]:
            if how == "alias":
                return _alias.sample(key, w, num_draws)
            blocks = _leaf_block_sums(lambda cols: w[..., cols], n, how == "descent")
            leaves = _pad_to(w, level_sizes(n)[0])
            return _sample_tree(key, leaves, blocks, n, num_draws, depth)

        return run

    return _tuning.staged(_plan(n, num_draws, num_rows, w.dtype), build, key, w)


def sample_scores(
    key: PRNGKey, scores: Array, row_max: Array, scale: Array, num_draws: int
) -> tuple[Array, Array]:
    """:func:`sample` of ``weights(scores, row_max, scale)`` (``scores`` ``(R, n)``,
    ``row_max`` and ``scale`` ``(R,)``), without writing the weights to memory
    when the descent or the hybrid is used: its leaves' blocks are summed in the
    pass that computes the weights, and a draw recomputes the weights of the
    ``K`` leaves it looks at from the unpadded scores (the same expression; were
    XLA to round it differently there, each is still within the weights' error
    of exact, which :func:`guarantee` counts twice)."""
    num_rows, n = scores.shape
    _check_size(num_rows, n)
    scores, row_max, scale = _logits.no_gradient((scores, row_max, scale))

    def build(plan: tuple[str, int]) -> Callable[..., tuple[Array, Array]]:
        how, depth = plan

        def run(key: PRNGKey, scores: Array, row_max: Array, scale: Array):
            if how == "alias":
                return _alias.sample(key, weights(scores, row_max, scale), num_draws)
            blocks = _leaf_block_sums(
                lambda cols: weights(scores[:, cols], row_max, scale), n, how == "descent"
            )

            def leaf_weights(block: Array, rows: Array) -> Array:
                return weights(block, row_max[rows], scale[rows])

            return _sample_tree(key, scores, blocks, n, num_draws, depth, leaf_weights)

        return run

    dtype = jnp.result_type(scale)
    plan = _plan(n, num_draws, num_rows, dtype)
    return _tuning.staged(plan, build, key, scores, row_max, scale)


# ----------------------------------------------------------------------------- guarantee


def guarantee(
    n: int, epsilon: float, dtype=np.float32, recomputed: bool = True
) -> tuple[float, float]:
    """The (ε', δ') of one draw of :func:`sample` for rows of ``n`` outcomes, when the
    exact mechanism is ε-DP with weights from :func:`weights` (SECURITY.md): the
    largest of the descent's and (where they may be used) the alias table's and
    the hybrid's, so that the choice of :func:`layout` never changes it. Float64
    weights always take the descent (:func:`_plan`), so their bound is its own.

    Descent: ``ε' = ε + 4 a`` with ``a = 2 (2 u_exp + 2u) + (K - 1) u + (L + 1)
    2**-23`` (the weights counted once when given rather than recomputed; ``u_exp =
    4u``, :data:`EXP_ERROR_U`; the leaves' float32 block sums; ``L + 1`` levels),
    and ``δ' = (L + 1) (K - 1) 2**-40 + n (e**-87 + 2**-78)`` (children of share
    below 2**-40, weights below float32's normal range, and outcomes below a node
    of total under :data:`TINY_NODE`; ``e**-708 + 2**-916`` in float64). Alias table:
    :func:`jaxdp._alias.guarantee`, plus the same ``n e**-87``. Hybrid: the
    descent's with its ``L`` upper levels replaced by an alias table over the
    ``ceil(n / K)`` block sums, ``a = 2 (2 u_exp + 2u) + (K - 1) u +
    a_t(b_blocks) + 2**-23`` (:func:`jaxdp._alias.table_error`) and ``δ' =
    δ_alias(b_blocks) + (K - 1) 2**-40 + n e**-87``; at depth ``j >= 2``, a table
    over level ``j``'s high words and ``j`` levels: ``a = 2 (2 u_exp + 2u) + (K -
    1) u + u + a_t(b_j) + j 2**-23``, ``δ' = δ_alias(b_j) + j (K - 1) 2**-40 + n
    e**-87``.
    """
    u = float(np.finfo(dtype).eps) / 2
    levels = num_levels(n)
    if np.dtype(dtype) == np.float64:  # the descent only (_plan)
        w_err = (2 if recomputed else 1) * weight_error(dtype)
        a = w_err + (K - 1) * u * (levels > 1) + levels * 2.0**-52
        delta = levels * (K - 1) * 2.0**-80 + n * (math.exp(-708) + 2.0**-916)
        return epsilon + 4 * a, delta
    # weights (weight_error, 10u; twice when the leaves are recomputed from the
    # scores, as sample_scores does, once when given as weights, as sample), the
    # leaves' float32 block sums ((K - 1) u), each level's choice.
    w_err = (2 if recomputed else 1) * weight_error(dtype)
    # weights below the normal range, and outcomes below a tiny node (_choose)
    tiny = n * (math.exp(-87) + TINY_NODE)
    a = w_err + (K - 1) * u * (levels > 1) + levels * 2.0**-23
    bounds = [(epsilon + 4 * a, levels * (K - 1) * SHARE_FLOOR + tiny)]
    if _alias.log2_columns(n) > _alias.MAX_LOG2_COLUMNS:
        return bounds[0]
    eps_a, delta_a = _alias.guarantee(n, epsilon, weight_error(dtype))
    bounds.append((eps_a, delta_a + tiny))
    if n > K:  # the hybrid needs two blocks at least (jaxdp._tuning.layout)
        # The hybrid: a table over the blocks (float32 sums of K weights, within
        # (K - 1) u), then one choice among the block's K recomputed weights.
        num_blocks = -(-n // K)
        b = _alias.log2_columns(num_blocks)
        a = w_err + (K - 1) * u + _alias.table_error(b) + 2.0**-23
        eps_h = epsilon + 4 * a
        delta_h = (1 + math.exp(eps_h)) * 2.0 ** -(60 - b) + (K - 1) * SHARE_FLOOR + tiny
        bounds.append((eps_h, delta_h))
    # Deeper hybrids: a table over the high words of level j's double-float sums
    # (within u of them), then j levels of the descent.
    for j, count in enumerate(level_counts(n)[2:-1], start=2):
        b = _alias.log2_columns(count)
        a = w_err + (K - 1) * u + u + _alias.table_error(b) + j * 2.0**-23
        eps_h = epsilon + 4 * a
        delta_h = (1 + math.exp(eps_h)) * 2.0 ** -(60 - b) + j * (K - 1) * SHARE_FLOOR + tiny
        bounds.append((eps_h, delta_h))
    return max(e for e, _ in bounds), max(d for _, d in bounds)
