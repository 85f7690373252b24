"""Many draws from one row: an alias table built in exact fixed point, drawn with 64 bits.

When a row is drawn from many times (``S`` draws per row, ``S`` large against
the row's ``n``), the per-draw work of the descent (:mod:`jaxdp._descent`: an
8-lane gather, a sorting network and a 64-bit uniform per level) dominates.
An alias table (Walker 1977; Vose 1991) makes every draw O(1): a uniform column
``j`` of ``N = 2**b >= n`` columns and one comparison of a uniform against the
column's threshold ``tau_j``, returning ``j`` below it and ``alias_j`` above.

Construction. Weights are measured in *column units* ``c_i = N w_i / sum(w)``
(double-float: the total by blocks of 16, then ``N / total`` and the products).
Items with ``c_i < 1`` are light, the others heavy; both keep the row's order.
From there on everything is exact integer arithmetic in ``64 - b``-bit fixed
point (a column is ``2**(64 - b)`` units; 64-bit values as pairs of uint32
words, so no x64 is needed): a light keeps ``tau = c`` rounded to the grid and
has the deficit ``1 - tau``; a heavy has the surplus ``c - 1``. The classic
sequential sweep — the current heavy fills the next light, and turns light
itself once its residual drops below 1, to be filled by the next heavy — has a
closed form in prefix sums (Hübschle-Schneider & Sanders, "Parallel weighted
random sampling", 2019, give a parallel sweep of this kind): with ``D(k)`` the
lights' cumulative deficits and ``S(h)`` the heavies' cumulative surpluses,
after lights ``1..k`` and heavies ``1..h-1`` have been settled the residual of
heavy ``h`` is ``1 + S(h) - D(k)``. Hence

* light ``k`` keeps ``tau_k`` and is aliased to the first heavy ``h`` with
  ``S(h) >= D(k - 1)``;
* heavy ``h`` keeps ``tau_h = 1 + S(h) - D(k*)``, ``k*`` the first light with
  ``D(k*) > S(h)`` (its whole column if there is none), and is aliased to
  heavy ``h + 1``.

``D`` and ``S`` are exact: the fixed-point values are cut into limbs of ``31 -
b`` bits whose int32 prefix sums cannot overflow (:func:`prefix_sums`), and put back
together with carries. Two binary searches over them replace the sequential
loop, and the sweep they encode is the exact one for the rounded masses.

Law (``SECURITY.md``, "the categorical kernel", item 5). Outcome ``i`` is
drawn with probability ``(t_i + sum_{j: alias_j = i} (1 - t_j)) / N`` for the
stored thresholds ``t``: every column holds exactly ``1 / N``, so the
implemented law is exactly computable from the tables. A light's share is its
own ``tau``: its weight up to the common factor of the total's rounding and
``~3u**2``, and an *absolute* two units of the grid (``2**-63`` of probability,
at most ``2**(b - 63)`` over all outcomes, which goes to δ'). A heavy's mass is
``1 + surplus`` exactly, by telescoping over the lights it serves, except where
the rounded surpluses and deficits do not balance: the heavies at the end of
the sweep then lose (or the last one gains) the difference, at most
``N (theta + 5u**2)`` columns with ``theta = 30 ceil(b / 4) u**2`` the total's
error, relative to a mass of at least one column. :func:`table_error` is that
relative error, :func:`guarantee` the result.

Cost. Per row: a double-float pass, two exact prefix sums and two binary
searches over ``N`` entries (``O(N log N)``, no sort). Per draw: one threefry
block (two 32-bit words), two gathers and two compares, against the descent's
two to seven levels of eight lanes. The hybrid layout of
:mod:`jaxdp._descent` builds this table over one level of the descent (the leaf
blocks, or a level above them).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from . import _tracing, _tuning
from . import _twofloat as tf
from ._random import bits64
from ._typing import Array, PRNGKey

#: Largest table built, ``N = 2**b`` columns: at ``b = 20`` every outcome's relative
#: error is at most 8.2e-7 (:func:`table_error`), the fixed-point grid is
#: ``2**-44`` of a column and the prefix sums' limbs are 11 bits wide.
MAX_LOG2_COLUMNS = 20


def log2_columns(n: int) -> int:
    """``b`` with ``N = 2**b`` columns for rows of ``n`` outcomes (at least 2, so that
    the threshold's high word stays below ``2**31``)."""
    return max(2, math.ceil(math.log2(max(n, 1))))


# ----------------------------------------------------------------------------- 64-bit words
#
# Unsigned 64-bit integers as pairs ``(high, low)`` of uint32 words, so that the
# tables need no x64.

_U32 = np.uint32


def _add64(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    low = a[1] + b[1]  # wraps
    return a[0] + b[0] + (low < a[1]).astype(jnp.uint32), low


def _sub64(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    low = a[1] - b[1]  # wraps
    return a[0] - b[0] - (a[1] < b[1]).astype(jnp.uint32), low


def _le64(a: tuple[Array, Array], b: tuple[Array, Array]) -> Array:
    return (a[0] < b[0]) | ((a[0] == b[0]) & (a[1] <= b[1]))


def _lt64(a: tuple[Array, Array], b: tuple[Array, Array]) -> Array:
    return (a[0] < b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))


def _where64(c: Array, a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    return jnp.where(c, a[0], b[0]), jnp.where(c, a[1], b[1])


def _shift_up(x: Array, s: int) -> tuple[Array, Array]:
    """``x * 2**s`` (uint32 ``x``, static ``0 <= s < 64``) as a 64-bit pair; the
    caller guarantees it is below ``2**64``."""
    if s == 0:
        return jnp.zeros_like(x), x
    if s < 32:
        return x >> _U32(32 - s), x << _U32(s)
    return x << _U32(s - 32), jnp.zeros_like(x)


def _bits(x: tuple[Array, Array], s: int, width: int) -> Array:
    """Bits ``s .. s + width - 1`` of a 64-bit pair (static ``s``, ``width <= 31``)."""
    high, low = x
    if s >= 32:
        word = high >> _U32(s - 32)
    elif s + width <= 32:
        word = low >> _U32(s)
    else:
        word = (low >> _U32(s)) | (high << _U32(32 - s))
    return word & _U32(2**width - 1)


def _to_fixed(gh: Array, gl: Array, frac: int) -> tuple[Array, Array]:
    """``floor(g * 2**frac)`` for a non-negative double-float ``g = gh + gl`` (below
    ``2**(64 - frac)``, ``32 <= frac <= 62``) as a 64-bit pair, within 2 units.

    Each float32 part is scaled by an exact power of two and cut into its whole
    high word and the 32 bits below, exactly (a float32 has 24 significant bits).
    """
    f32 = jnp.float32

    def words(x: Array) -> tuple[Array, Array]:  # floor(x * 2**frac), x >= 0
        y = x * f32(2.0 ** (frac - 32))  # exact: a power of two, no overflow
        high = jnp.floor(y)
        low = jnp.floor((y - high) * f32(2.0**32))  # exact fraction, then scaled
        return high.astype(jnp.uint32), low.astype(jnp.uint32)

    top = words(gh)
    part = words(jnp.abs(gl))
    out = _where64(gl < 0, _sub64(top, part), _add64(top, part))
    return _where64(gh > 0, out, (jnp.zeros_like(top[0]), jnp.zeros_like(top[1])))


def prefix_sums(x: Array) -> Array:
    """Inclusive prefix sums of non-negative int32 ``x`` along its last axis, whose
    total is below ``2**31`` (so no partial sum overflows, in any order).

    On a backend with a :data:`jaxdp._tuning.PREFIX_SUM_BLOCK` ``k``: blocks of ``k``
    are summed by one integer product with the ``k x k`` upper-triangular matrix of
    ones, their totals the same way (recursively) and added back; other lengths,
    and backends without one, take one ``cumsum``. XLA:CPU runs a ``cumsum`` as a
    ``reduce_window`` at several ns an entry, and the products take a quarter to a
    half of that. Exact integer arithmetic either way, so the same sums."""
    k = _tuning.PREFIX_SUM_BLOCK[_tuning.kind()]
    n = x.shape[-1]
    if k < 2 or n < 2 or (n > k and n % k):
        return jnp.cumsum(x, axis=-1, dtype=jnp.int32)
    k = min(k, n)
    i = np.arange(k)
    upper = jnp.asarray((i[:, None] <= i[None, :]).astype(np.int32))
    blocks = x.reshape(x.shape[:-1] + (n // k, k))
    within = jnp.einsum("...i,ij->...j", blocks, upper, preferred_element_type=jnp.int32)
    if n == k:
        return within.reshape(x.shape)
    totals = within[..., -1]
    before = prefix_sums(totals) - totals
    return (within + before[..., None]).reshape(x.shape)


def _cumsum64(x: tuple[Array, Array], b: int) -> tuple[Array, Array]:
    """Exact inclusive prefix sums along the last axis (``2**b`` entries, total below
    ``2**64``): cut into limbs of ``31 - b`` bits, whose int32 prefix sums cannot
    overflow, summed at once (:func:`prefix_sums`) and put back together with carries."""
    width = 31 - b
    starts = range(0, 64, width)
    limbs = jnp.stack([_bits(x, s, min(width, 64 - s)).astype(jnp.int32) for s in starts])
    sums = prefix_sums(limbs).astype(jnp.uint32)
    out = (jnp.zeros_like(x[0]), jnp.zeros_like(x[1]))
    for k, s in enumerate(starts):
        out = _add64(out, _shift_up(sums[k], s))
    return out


def take_rows(table: Array, rows: Array, cols: Array, clip: bool = True) -> Array:
    """``table[rows, cols]`` for an ``(R, N)`` table and int32 ``rows`` and ``cols``
    (broadcast against each other, in range) as one 1-D gather (XLA:CPU's 2-D
    gather is several times slower); ``clip``: the gather's ``mode="clip"``, else
    plain indexing (the two compile differently; each caller keeps its own).

    Under ``vmap`` of a batched table the batch joins the rows, ``(B * R, N)``, and
    the gather stays one 1-D gather: batched, it became a gather whose indices
    were built by concatenation at every call, the cost of a ``vmap`` over an ε
    grid (the same values either way)."""
    return _take_rows(clip)(table, rows, cols)


def _row_gather(gather):
    """``gather(table, rows, index)`` as a ``custom_vmap`` whose rule joins a batched
    table's batch to its rows, ``(B * R, N)``, offsetting ``rows`` to match: the
    gather stays one gather without batching dimensions."""
    take = jax.custom_batching.custom_vmap(gather)

    @take.def_vmap
    def _batched(
        axis_size: int, in_batched: list[bool], table: Array, rows: Array, index: Array
    ) -> tuple[Array, bool]:
        table_batched, rows_batched, index_batched = in_batched
        rows = rows if rows_batched else rows[None]  # broadcast in the gather's index
        index = index if index_batched else index[None]
        if table_batched:
            num_rows = table.shape[1]
            batch = jnp.arange(axis_size, dtype=jnp.int32) * num_rows
            rows = rows + batch.reshape((axis_size,) + (1,) * (rows.ndim - 1))
            table = table.reshape(axis_size * num_rows, -1)
        return take(table, rows, index), True

    return take


@functools.cache
def _take_rows(clip: bool):
    def take(table: Array, rows: Array, cols: Array) -> Array:
        flat = rows * table.shape[-1] + cols
        return jnp.take(table.reshape(-1), flat, mode="clip") if clip else table.reshape(-1)[flat]

    return _row_gather(take)


def take_blocks(table: Array, rows: Array, blocks: Array, width: int) -> Array:
    """``table[rows, blocks * width + j]`` for ``j < width``, shape ``rows.shape +
    (width,)``, for an ``(R, N)`` table with ``N`` a multiple of ``width`` and int32
    ``rows`` and ``blocks`` of one shape (in range): one gather of ``width``-wide
    slices from the table seen as ``(R * N / width, width)``, rather than ``width``
    scalar indices per slice. Under ``vmap`` of a batched table the batch joins the
    rows, as in :func:`take_rows`."""
    return _take_blocks(width)(table, rows, blocks)


@functools.cache
def _take_blocks(width: int):
    def take(table: Array, rows: Array, blocks: Array) -> Array:
        flat = rows * (table.shape[-1] // width) + blocks
        return table.reshape(-1, width)[flat]

    return _row_gather(take)


def _flat_take(table: Array, at: Array) -> Array:
    """``table[r, at[r, ...]]`` for ``(R, N)`` tables and ``(R, ...)`` positions."""
    return take_rows(table, jax.lax.broadcasted_iota(jnp.int32, at.shape, 0), at)


def _take64(table: tuple[Array, Array], at: Array) -> tuple[Array, Array]:
    return _flat_take(table[0], at), _flat_take(table[1], at)


def _lower_bound(keys: tuple[Array, Array], q: tuple[Array, Array], strict: bool) -> Array:
    """Per query, the first position ``p`` with ``key[p] >= q`` (``> q`` when
    ``strict``) in its row's ``N = 2**b`` non-decreasing 64-bit keys, else ``N``: a
    branchless binary search (the count of keys below ``q`` is built bit by bit,
    top bit first), one ``fori_loop`` step per bit, compiled once."""
    size = keys[0].shape[-1]
    b = size.bit_length() - 1
    below = _le64 if strict else _lt64

    def step(i, p):
        half = jnp.right_shift(jnp.int32(size), i + 1)
        return jnp.where(below(_take64(keys, p + half - 1), q), p + half, p)

    p0 = _tracing.varying_like(jnp.zeros(q[0].shape, jnp.int32), keys, q)  # shard_map
    p = jax.lax.fori_loop(0, b, step, p0)
    # p = N - 1: is the last key below too?
    return jnp.where((p == size - 1) & below(_take64(keys, p), q), size, p)


def _total(w: Array) -> tuple[Array, Array]:
    """Double-float row sums of ``(R, 2**b)`` non-negative weights, by blocks of 16
    (in any order within a block): every weight passes through at most
    ``15 ceil(b / 4)`` additions, so the sum is within ``30 ceil(b / 4) u**2`` of exact."""
    h, lo = w, jnp.zeros_like(w)
    while h.shape[-1] > 1:
        k = min(16, h.shape[-1])
        shape = (h.shape[0], h.shape[-1] // k, k)
        h, lo = tf.dd_sum(h.reshape(shape), lo.reshape(shape), 2)
    return h[:, 0], lo[:, 0]


def build(w: Array) -> tuple[Array, Array, Array]:
    """Alias tables for weights ``w`` ``(R, n)`` (non-negative).

    Returns ``(packed, low, ok)``: ``(R, N)`` uint32 words ``high << b | alias`` and
    the thresholds' low words (column ``j`` is outcome ``j``; columns ``>= n`` have
    threshold 0), and ``(R,)`` the rows' validity (a positive, finite total).
    """
    num_rows, n = w.shape
    b = log2_columns(n)
    size = 2**b
    frac = 64 - b  # fixed point: one column is 2**frac units
    f32 = w.dtype.type
    # Exact power-of-two normalisation, so that N / total cannot overflow.
    _, e = jnp.frexp(jnp.max(w, axis=-1, keepdims=True))
    w = jnp.ldexp(w, -jnp.where(jnp.isfinite(e), e, 0))
    w = jnp.pad(w, ((0, 0), (0, size - n)))
    t_h, t_l = _total(w)
    ok = jnp.isfinite(t_h) & (t_h > 0)
    t_h = jnp.where(ok, t_h, 1)[:, None]
    t_l = jnp.where(ok, t_l, 0)[:, None]
    # q = N / total, double-float; c = w q in column units.
    q_h = f32(size) / t_h
    # One value each (see _materialise_floats): ``f32(size) - p`` could otherwise
    # read p as a product contracted into a fused multiply-add, unlike pe's.
    p, pe = _materialise_floats(*tf.two_prod(q_h, t_h))
    q_l = ((f32(size) - p) - pe - q_h * t_l) / t_h
    zero = jnp.zeros_like(w)
    # The constant 1 enters TwoSums below: hidden from XLA's simplifier, which
    # would rewrite (1 + x) - 1 to x and zero the error term.
    one = jnp.broadcast_to(jax.lax.optimization_barrier(f32(1)), w.shape)
    # Inputs and outputs of the one double-float product materialised (see
    # _materialise_floats): compiled, the tables were up to 800u off at 2**20 columns.
    w, q_h, q_l = _materialise_floats(w, q_h, q_l)
    c_h, c_l = _materialise_floats(*tf.dd_mul(w, zero, q_h, q_l))
    heavy = tf.dd_le(one, zero, c_h, c_l)
    # Fixed point from here on, every step exact integer arithmetic: a light keeps
    # tau = c (at least one unit short of its whole column) and has the deficit
    # 1 - tau; a heavy has the surplus c - 1 (TwoSum: exact but for c's own error).
    one64 = _shift_up(jnp.ones(w.shape, jnp.uint32), frac)
    unit = (jnp.zeros_like(one64[0]), jnp.ones_like(one64[1]))
    nil = (jnp.zeros_like(one64[0]), jnp.zeros_like(one64[1]))
    whole = _sub64(one64, unit)  # 1 - 2**-frac
    g_h, g_l = tf.two_sum(c_h, -one)
    g_h, g_l = tf.fast_two_sum(g_h, g_l + c_l)
    kept = _to_fixed(jnp.where(heavy, zero, c_h), jnp.where(heavy, zero, c_l), frac)
    kept = _where64(_le64(kept, whole), kept, whole)
    surplus = _to_fixed(jnp.where(heavy, g_h, zero), jnp.where(heavy, g_l, zero), frac)
    # Prefix sums of the deficits D and the surpluses S, in the rows' own order:
    # lights and heavies need not be separated.
    d = _cumsum64(_where64(heavy, nil, _sub64(one64, kept)), b)
    s = _cumsum64(_where64(heavy, surplus, nil), b)
    pos = jax.lax.broadcasted_iota(jnp.int32, (num_rows, size), 1)
    # A light is served by the first heavy with S >= D before it. S only rises at
    # heavies, so the first position reaching it is a heavy, or position 0 (a
    # query of 0: any heavy, the first one) or none (the last heavy: the
    # surpluses' total, rounded apart from the deficits', falls short).
    d_before = tuple(jnp.pad(x[:, :-1], ((0, 0), (1, 0))) for x in d)
    server = _lower_bound(s, d_before, strict=False)
    first_heavy = jnp.min(jnp.where(heavy, pos, size), axis=-1, keepdims=True)
    last_heavy = jnp.max(jnp.where(heavy, pos, -1), axis=-1, keepdims=True)
    server_heavy = _flat_take(heavy, jnp.minimum(server, size - 1)) & (server < size)
    server = jnp.where(server_heavy, server, jnp.where(server < size, first_heavy, last_heavy))
    server = jnp.where(last_heavy >= 0, server, pos)  # no heavy at all: rounding
    # A heavy turns light at the first light with D > S(h), keeping 1 + S(h) - D
    # there (in [0, 1): D - S(h) is at most that light's deficit), and is served
    # by the next heavy; if there is none, it keeps its whole column.
    k_star = _lower_bound(d, s, strict=True)
    found = k_star < size
    keep = _sub64(_add64(one64, s), _take64(d, jnp.minimum(k_star, size - 1)))
    later = jnp.where(heavy, pos, size)
    next_heavy = jax.lax.cummin(
        jnp.pad(later[:, 1:], ((0, 0), (0, 1)), constant_values=size), axis=1, reverse=True
    )
    next_heavy = jnp.where(next_heavy < size, next_heavy, pos)
    tau = _where64(heavy, _where64(found, keep, whole), kept)
    alias = jnp.where(heavy, jnp.where(found, next_heavy, pos), server)
    packed = (tau[0] << np.uint32(b)) | alias.astype(jnp.uint32)
    return packed, tau[1], ok


def _materialise_floats(*xs: Array) -> tuple[Array, ...]:
    """Float arrays computed once, into buffers of their own (:func:`_materialise` on
    their bits). Inside one fusion XLA:CPU may emit a subexpression once per use and
    contract each copy differently into fused multiply-adds, so that a value an
    error-free transform reads twice (``fast_two_sum`` reads its second operand
    twice) takes two values, and the transform is no longer exact. Measured on the
    compiled build before this: column masses off by up to 793u relative at 2**20
    columns (13.5u at 2**17), against the 5u**2 the analysis assumes."""
    words = _materialise(*(jax.lax.bitcast_convert_type(x, jnp.uint32) for x in xs))
    pairs = zip(words, xs, strict=True)
    return tuple(jax.lax.bitcast_convert_type(x, x_in.dtype) for x, x_in in pairs)


def _materialise(*tables: Array) -> tuple[Array, ...]:
    """The tables, computed once: XLA would otherwise fuse their elementwise
    producers into the per-draw gathers and recompute them at every draw (5x
    slower on CPU; ``optimization_barrier`` does not stop it there). Two passes
    of a loop that XORs them with a zero XLA cannot see is zero return them
    unchanged from buffers of their own. The trip count is static, so the loop's
    predicate is never batched (``checkify`` refuses batched while loops)."""

    def body(_, ts):
        zero = (ts[0].reshape(-1)[0] >> np.uint32(31)) >> np.uint32(1)
        return tuple(t ^ zero for t in ts)

    return jax.lax.fori_loop(0, 2, body, tables)


def draw(key: PRNGKey, packed: Array, low: Array, num_draws: int) -> Array:
    """``(num_draws, R)`` int32 draws from alias tables ``(R, N)``.

    The first 32-bit word picks the column (its top ``b`` bits) and compares its
    other ``32 - b`` bits with the threshold's high word; the second word breaks a
    tie against the low word: a ``64 - b``-bit comparison.
    """
    num_rows, size = packed.shape
    b = int(round(math.log2(size)))
    shape = (num_draws, num_rows)
    w0, w1 = bits64(key, shape)  # one threefry block per draw
    col = (w0 >> np.uint32(32 - b)).astype(jnp.int32)
    rest = w0 & np.uint32(2 ** (32 - b) - 1)
    if num_rows == 1 and b <= _tuning.ALIAS_SELECT_MAX_LOG2[_tuning.kind()]:
        word, word_low = _select_columns(packed[0], low[0], col)
    else:
        rows = jax.lax.broadcasted_iota(jnp.int32, shape, 1)
        word, word_low = take_rows(packed, rows, col), take_rows(low, rows, col)
    high = word >> np.uint32(b)
    keep = (rest < high) | ((rest == high) & (w1 < word_low))
    return jnp.where(keep, col, (word & np.uint32(size - 1)).astype(jnp.int32))


def _select_columns(packed: Array, low: Array, col: Array) -> tuple[Array, Array]:
    """``(packed[col], low[col])`` for one row's small tables ``(N,)`` by a chain of
    ``N`` selects instead of a gather: the same values, so the same draws. The
    whole draw (threefry, lookup, comparison) is then one elementwise loop that
    XLA:CPU vectorises, where a gather splits it into two loops that each hash
    the draw's counter again (:data:`jaxdp._tuning.ALIAS_SELECT_MAX_LOG2`)."""
    word = jnp.broadcast_to(packed[0], col.shape)
    word_low = jnp.broadcast_to(low[0], col.shape)
    for j in range(1, packed.shape[0]):
        hit = col == j
        word = jnp.where(hit, packed[j], word)
        word_low = jnp.where(hit, low[j], word_low)
    return word, word_low


def sample(key: PRNGKey, w: Array, num_draws: int) -> tuple[Array, Array]:
    """Draws for weights ``w`` ``(R, n)``: ``(num_draws, R)`` int32 and row validity."""
    packed, low, ok = build(w)
    packed, low = _materialise(packed, low)
    idx = draw(key, packed, low, num_draws)
    return jnp.minimum(idx, w.shape[-1] - 1), ok


# ----------------------------------------------------------------------------- guarantee


def table_error(b: int) -> float:
    """Relative error ``a_t`` of every outcome's probability in a table of ``2**b``
    columns, beside the weights' own: the total's rounding ``theta = 30 ceil(b / 4)
    u**2`` (a common factor), ``c``'s own ``~5u**2`` and the imbalance of the
    rounded surpluses and deficits, at most ``N (theta + 5u**2) + 2**(2b - 63)``
    columns, on heavies of at least one column."""
    u2 = 2.0**-48
    theta = 30 * math.ceil(b / 4) * u2
    return (2**b + 1) * (theta + 5 * u2) + 2.0 ** (2 * b - 62)


def guarantee(n: int, epsilon: float, weight_error: float) -> tuple[float, float]:
    """(ε', δ') of one draw for rows of ``n`` outcomes whose computed weights are
    within relative ``weight_error`` of the exact mechanism's (``SECURITY.md``).

    ``ε' = ε + 4 weight_error + 2 a_t`` with ``a_t`` = :func:`table_error`, and
    ``δ' = (1 + e**ε') 2**-(60 - b)``, which bounds the lights' absolute grid error
    (``2**(b - 63)`` over all outcomes) with room to spare; ``N = 2**b`` columns.
    """
    b = log2_columns(n)
    eps = epsilon + 4 * weight_error + 2 * table_error(b)
    return eps, (1 + math.exp(eps)) * 2.0 ** -(60 - b)
