"""Vectorised sampling kernels shared by the finite-range mechanisms.

Everything here works on *logits*: ``(..., n)`` arrays, already scaled by
epsilon / (2 * sensitivity) and shifted so each row's maximum is 0. Public
functions validate, canonicalise and then call these under ``jax.jit``.

Two ways to draw ``argmax``-style selections:

* :func:`noisy_argmax`: argmax(logits + noise), one noise variate per
  candidate per draw (Gumbel: the exponential mechanism; Laplace and
  exponential noise: report-noisy-max). The work is cut into blocks of at most
  :data:`CHUNK_ELEMENTS` noise values (draws x rows x candidates), evaluated
  one after the other, so no ``draws x n`` noise array ever exists: memory is
  bounded on every backend and the live block stays in the CPU caches. Each
  block is generated, added and reduced in one fused pass; the argmax is a
  max followed by "first index equal to the max" (two vectorised reductions,
  much faster on CPU than XLA's variadic argmax reduction, same result).
* :func:`inverse_cdf`: one pass of ``exp`` per row, then one uniform per draw
  and a search. Two layouts, both exact inverse-CDF samplers:

  - *guided* (many draws per row): the full prefix sum of the row, and a guide
    table (Chen & Asau 1974) of ``m`` cells that stores, for each cell of the
    uniform's range, which slice of the prefix sums can hold the answer. A draw
    reads its cell and binary-searches that slice only: O(1) steps for most
    rows instead of log2(n). The answer is *bit for bit* the one of a plain
    ``searchsorted`` over the prefix sums.
  - *blocked* (few draws per row, e.g. one draw for each of many rows): masses
    of blocks of :data:`BLOCK` (64 for rows of 512 and more) outcomes (the
    row maximum, the ``exp`` and a strided reduction fused into one pass
    over the scores: no ``(B, n)`` temporary), then masses of blocks of
    blocks, up to a top level of at most two blocks' worth of entries. A draw
    walks down the levels, at each one accumulating the masses under its
    current entry until the running sum passes what is left of ``u * total``;
    at the bottom it reads the scores of one block only, and draws inside
    the block at the same fraction of the block's mass (relative to the
    block's own maximum, so nothing after the first pass needs the row
    maximum). The rows' validity comes from the totals (a NaN, ``+inf`` or
    all ``-inf`` row has no finite total), not from a second pass.

Exactness. Both layouts sample ``softmax(logits)`` exactly, up to float
rounding of the sums (and the resolution of the uniform, see
:mod:`jaxdp._random`). An outcome whose logit is ``-inf`` is never returned,
whatever the summation order of the backend: the guided layout passes its
prefix sums through a running maximum that ignores zero-mass entries (so such
an entry never exceeds its predecessor); the blocked layout accumulates left
to right (a zero mass never raises the running sum) and can only land on a
block of positive mass and, inside it, on a finite logit; draws that round
past the total go to the last outcome of positive mass. Equal scores have
equal masses and so equal chances.

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
page faults. The code here is written around that: the logits are
select-free, the block masses are a strided ``reduce_window`` (not a reshape),
the bottom level re-reads the few scores it needs (``inverse_cdf(...,
scores, scale)``) rather than the logits, and no reader but the first pass
needs the row maximum, so that XLA fuses the maximum into that pass (one read
of the scores instead of two). On CPU XLA also drops
``optimization_barrier``, so the per-draw walk is written lane by lane
(:func:`_pick`) to stay one elementwise fusion.

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
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import define_prng_impl, threefry_prng_impl

from . import _random
from ._typing import Array, PRNGKey

#: Uniforms (draws x rows) handled at once by the guided inverse CDF.
CHUNK_DRAWS = 1 << 20

#: Candidates per block of the blocked inverse CDF.
BLOCK = 32

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


def _last_positive(p: Array) -> Array:
    """Index of the last entry > 0 along the last axis (0 when there is none)."""
    iota = jax.lax.broadcasted_iota(jnp.int32, p.shape, p.ndim - 1)
    return jnp.max(jnp.where(p > 0, iota, 0), axis=-1)


def _monotone_cdf(p: Array) -> Array:
    """Inclusive prefix sums of ``p >= 0`` along the last axis in which an entry
    with ``p == 0`` equals its predecessor exactly (0 before the first positive
    entry), whatever the summation order of the backend's scan."""
    c = jnp.cumsum(p, axis=-1)
    return jax.lax.cummax(jnp.where(p > 0, c, jnp.zeros_like(c)), axis=p.ndim - 1)


def _bit_length(x: Array) -> Array:
    """Number of bits of a non-negative int32: ceil(log2(x + 1))."""
    return 32 - jax.lax.clz(x.astype(jnp.int32))


def _guide_size(n: int, draws: int) -> int:
    """Guide-table cells: a power of two near 2n for short rows, capped so the
    table stays cache-resident for long ones (4096 cells, or n/64), and at
    draws/4 (building it costs about as much as that many draws).

    Measured for S = 10**6 draws (ms, 2-core EPYC): n = 10**4: 2.7 with 4096
    cells vs 5.4 with 16384; n = 10**5: 8.5 with 8192 vs 25 with 262144;
    n = 10**6: 13 with 16384 vs 122 with 2**21 (hand-written searchsorted:
    22, 25, 20).
    """
    pow2 = lambda x: 1 << max(0, (x - 1).bit_length())  # noqa: E731
    m = min(pow2(2 * n), max(4096, pow2(n) >> 6), pow2(max(draws // 4, 1)), 1 << 22)
    return max(m, 1)


def _take(flat: Array, idx: Array) -> Array:
    """``flat[idx]`` through a 1-D gather (index arrays with a trailing unit
    dimension make XLA's CPU compile time grow exponentially with chained
    gathers)."""
    return flat[idx.reshape(-1)].reshape(idx.shape)


def _lift(table: Array, base: Array, v: Array, pos: Array, steps: int, n: int) -> Array:
    """Binary lifting: the largest ``p`` in ``[pos, pos + 2**steps - 1]`` with
    ``p <= n`` and ``table[base + p - 1] <= v`` (``table`` flat, row-sorted,
    rows of length ``n`` starting at ``base``)."""
    shape = jnp.broadcast_shapes(base.shape, v.shape, pos.shape)
    base, v, pos = (jnp.broadcast_to(a, shape).reshape(-1) for a in (base, v, pos))
    for s in reversed(range(steps)):
        cand = pos + (1 << s)
        value = table[base + jnp.clip(cand - 1, 0, n - 1)]
        pos = jnp.where((cand <= n) & (value <= v), cand, pos)
    return pos.reshape(shape)


#: Static step counts of the guided search; a row set uses the smallest one
#: that covers its widest guide cell.
_STEP_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 31)


#: Rows longer than this are searched by blocks of :data:`GUIDE_BLOCK` in
#: :func:`_guided`: the tables then hold block masses. Measured, S = 10**6
#: draws: n = 10**6 takes 12 ms with element tables and 29 ms by blocks;
#: n = 10**7 takes 151 ms with element tables and 64 ms by blocks of 16.
GUIDE_BLOCKS_ABOVE = 1 << 22

#: Outcomes per block in :func:`_guided`'s two-level mode.
GUIDE_BLOCK = 16


def _guided(
    key: PRNGKey,
    rows: Array,
    num_lead: int,
    leaf_logits: LeafReader | None = None,
) -> tuple[Array, Array]:
    """Inverse CDF with a guide table: ``(num_lead, B)`` draws for ``(B, n)``
    logits, and each row's total mass ``(B,)``.

    For a draw ``u`` in cell ``j = floor(u m)`` the answer
    ``#{i: cdf[i] <= u T}`` lies in ``[g[j], g[j+1]]`` with
    ``g[j] = #{i: cdf[i] <= (j/m) T}``: ``u m`` and ``j/m`` are exact (``m`` is a
    power of two) and rounding ``x T`` is monotone in ``x``. Binary lifting over
    ``ceil(log2(widest cell + 1))`` steps then gives exactly the plain
    ``searchsorted`` result. The step count is data-dependent; it selects one of
    a few statically unrolled branches, so each branch is a single fused loop.

    Rows longer than :data:`GUIDE_BLOCKS_ABOVE` are handled in two levels: the
    prefix sums and the guide are built over the masses of blocks of
    :data:`GUIDE_BLOCK` outcomes (a fused strided reduction; 16x smaller
    tables), and each draw then picks inside its block as :func:`_blocked`
    does.
    """
    num_rows, n = rows.shape
    dtype = rows.dtype
    by_blocks = n > GUIDE_BLOCKS_ABOVE
    mass = _block_sums(jnp.exp(rows), GUIDE_BLOCK) if by_blocks else jnp.exp(rows)
    size = mass.shape[-1]
    # Materialised tables (optimization_barrier): fusing their producers into
    # the gathers below would recompute them per gather, and makes XLA's
    # compile time explode with n.
    cdf, last = jax.lax.optimization_barrier((_monotone_cdf(mass), _last_positive(mass)))
    total = cdf[:, -1]
    m = _guide_size(size, num_lead * num_rows)
    flat_cdf = cdf.reshape(-1)
    row_ids = jnp.arange(num_rows, dtype=jnp.int32)
    full_steps = max(1, size.bit_length())
    # The guide: g[j] = #{i: cdf[i] <= (j/m) T}, by the same lifting from 0.
    fractions = jnp.arange(m + 1, dtype=dtype) * dtype.type(1.0 / m)
    queries = fractions[None, :] * total[:, None]
    guide = _lift(
        flat_cdf,
        (row_ids * size)[:, None],
        queries,
        jnp.zeros(queries.shape, jnp.int32),
        full_steps,
        size,
    )
    guide = jax.lax.optimization_barrier(guide)
    width = jnp.max(guide[:, 1:] - guide[:, :-1])
    buckets = [b for b in _STEP_BUCKETS if b < full_steps] + [full_steps]
    branch = jnp.sum(
        jnp.asarray(buckets[:-1], jnp.int32) < _bit_length(width)[None], dtype=jnp.int32
    )
    flat_guide = guide.reshape(-1)

    def draw(key: PRNGKey, per: int) -> Array:
        # The uniforms are drawn outside the switch: under vmap every branch
        # runs, and a key consumed inside each of them would be reused.
        u = _random.uniform(key, (per, num_rows), dtype)

        def run(steps: int) -> Callable[[Array], Array]:
            def go(u: Array) -> Array:
                cell = jnp.minimum((u * m).astype(jnp.int32), m - 1)
                pos = _take(flat_guide, row_ids[None, :] * (m + 1) + cell)
                v = u * total[None, :]
                pos = _lift(flat_cdf, row_ids[None, :] * size, v, pos, steps, size)
                return jnp.minimum(pos, last[None, :])

            return go

        k = jax.lax.switch(branch, [run(b) for b in buckets], u)
        if not by_blocks:
            return k
        v = u * total[None, :]
        at = row_ids[None, :] * size
        prev = _take(flat_cdf, at + jnp.maximum(k - 1, 0))
        prev = jnp.where(k > 0, prev, jnp.zeros_like(prev))
        rest = jnp.maximum(v - prev, 0)
        step = _take(flat_cdf, at + k) - prev
        draw_rows = jnp.broadcast_to(row_ids[None, :], k.shape)
        leaf = leaf_logits or _row_reader(rows)
        return _leaf_pick(k, _fraction_of(rest, step), draw_rows, n, leaf, GUIDE_BLOCK)

    per, chunks = _even_chunks(num_lead, max(1, CHUNK_DRAWS // num_rows))
    out = _map_steps(lambda k, _: draw(k, per), key, chunks)
    out = out.reshape((chunks * per, num_rows))
    return (out if chunks * per == num_lead else out[:num_lead]), total


def _block_sums(x: Array, width: int) -> Array:
    """Sums of consecutive blocks of ``width`` along the last axis (zero-padded).

    A strided ``reduce_window`` rather than a reshape: on CPU, XLA fuses it with
    the ``exp`` and the logits that feed it into one vectorised pass.
    """
    pad = -x.shape[-1] % width
    return jax.lax.reduce_window(
        x, jnp.zeros((), x.dtype), jax.lax.add, (1, width), (1, width), ((0, 0), (0, pad))
    )


def _pick(
    masses: Sequence[Array], v: Array, positive: Sequence[Array] | None = None
) -> tuple[Array, Array, Array]:
    """Sequential inverse-CDF step over the lanes ``masses`` (each shaped like ``v``).

    Returns ``(k, rest, step)``: ``k`` the first lane whose running sum
    exceeds ``v`` (clamped to the last lane of positive mass, or with
    ``positive`` the last lane where it is True), ``rest = v - (running sum
    before k) >= 0``, and ``step`` the rise of the running sum at lane ``k``
    (so ``rest < step`` unless the draw was clamped). The running sum is
    accumulated left to right, so a lane of mass 0 never raises it and is
    never the first to exceed ``v``.

    The lanes are separate arrays, not one ``(..., w)`` array: everything a
    draw does is then elementwise over the draws, and XLA keeps the whole walk
    in one loop fusion. (On CPU, XLA drops ``optimization_barrier`` and fuses a
    ``(...)``-shaped producer into each ``(..., w)``-shaped consumer, which
    recomputes the walk, random bits included, once per lane.)
    """
    zero = jnp.zeros(v.shape, v.dtype)
    acc = zero
    count = jnp.zeros(v.shape, jnp.int32)
    before = zero
    step = zero
    last = jnp.zeros(v.shape, jnp.int32)
    before_last = zero
    step_last = zero
    for j, m_j in enumerate(masses):
        new = acc + m_j
        below = new <= v
        count = count + below.astype(jnp.int32)
        before = jnp.where(below, new, before)
        step = jnp.where(count == j, new - acc, step)
        has = (m_j > 0) if positive is None else positive[j]
        last = jnp.where(has, j, last)
        before_last = jnp.where(has, acc, before_last)
        step_last = jnp.where(has, new - acc, step_last)
        acc = new
    clamp = count > last
    k = jnp.where(clamp, last, count)
    rest = v - jnp.where(clamp, before_last, before)
    return k, jnp.maximum(rest, zero), jnp.where(clamp, step_last, step)


def _lane_sum(lanes: Sequence[Array]) -> Array:
    """The lanes' total, accumulated left to right exactly as :func:`_pick`
    accumulates its running sum (so a draw ``u * total`` with ``u < 1`` is
    below the pick's final sum up to rounding of the product)."""
    total = lanes[0]
    for lane in lanes[1:]:
        total = total + lane
    return total


#: ``leaf(rows, cols) -> (values, scale)``: for each ``(rows[i], cols[i])`` a
#: value and a positive scale such that the logit there is ``(value - c) *
#: scale`` for some constant ``c`` of the row (the scores and the row's scale,
#: or the logits and 1).
LeafReader = Callable[[Array, Array], tuple[Array, Array]]


def _row_reader(rows: Array) -> LeafReader:
    """Reads single logits of ``rows`` ``(B, n)`` through a flat gather."""
    n = rows.shape[-1]
    flat = rows.reshape(-1)
    return lambda r, c: (_take(flat, r * n + c), jnp.ones((), rows.dtype))


def _blocked(
    key: PRNGKey,
    rows: Array,
    num_lead: int,
    leaf_logits: LeafReader | None = None,
    block: int = BLOCK,
) -> tuple[Array, Array]:
    """Multi-level inverse CDF for few draws per row: ``(num_lead, B)`` draws
    and each row's total mass ``(B,)``.

    Level 1 holds the masses of blocks of ``block`` outcomes (``exp`` fused
    into a strided reduction: one read of the logits, no ``(B, n)``
    temporary); each higher level sums ``block`` entries of the one below, up
    to a top of at most ``2 * block`` entries. A draw ``v = u T`` (``T`` the
    top's running total) walks down: at each level it gathers the ``block``
    masses under the chosen entry and takes the first whose running sum
    exceeds what is left of ``v``. At the leaves it draws inside the chosen
    block by :func:`_leaf_pick`. Every step is elementwise over the
    ``(num_lead, B)`` draws (see :func:`_pick`).
    """
    num_rows, n = rows.shape
    dtype = rows.dtype
    levels = [_block_sums(jnp.exp(rows), block)]
    while levels[-1].shape[-1] > 2 * block:
        levels.append(_block_sums(levels[-1], block))
    row_ids = jnp.broadcast_to(jnp.arange(num_rows, dtype=jnp.int32)[None, :], (num_lead, num_rows))
    top = levels[-1]
    u = _random.uniform(key, (num_lead, num_rows), dtype)
    lanes = [jnp.broadcast_to(top[None, :, j], u.shape) for j in range(top.shape[-1])]
    total = _lane_sum(lanes)
    k, rest, step = _pick(lanes, u * total)
    for level in reversed(levels[:-1]):
        width = level.shape[-1]
        flat = level.reshape(-1)
        lanes = []
        for j in range(block):
            col = k * block + j
            mass = _take(flat, row_ids * width + jnp.minimum(col, width - 1))
            lanes.append(jnp.where(col < width, mass, jnp.zeros_like(mass)))
        k_in, rest, step = _pick(lanes, rest)
        k = k * block + k_in
    leaf = leaf_logits or _row_reader(rows)
    idx = _leaf_pick(k, _fraction_of(rest, step), row_ids, n, leaf, block)
    return idx, total[0]


def _fraction_of(rest: Array, step: Array) -> Array:
    """``rest / step`` in ``[0, 1]``: where a draw falls inside the mass of the
    entry it chose (1 when it was clamped past the end, or the step is 0)."""
    one = jnp.ones_like(rest)
    return jnp.where(rest < step, rest / jnp.where(step > 0, step, one), one)


def _leaf_pick(
    k: Array, frac: Array, row_ids: Array, n: int, leaf: LeafReader, width: int = BLOCK
) -> Array:
    """The outcome inside block ``k`` (blocks of ``width`` outcomes of rows of
    ``n``) at fraction ``frac`` of the block's mass; only outcomes with a
    finite logit can be returned. ``k``, ``frac`` and ``row_ids`` have the
    draws' shape.

    Given its block, a draw's fraction ``frac`` of the block's mass is
    uniform on ``[0, 1)``, and the outcome is the first whose in-block running
    mass exceeds ``frac`` times the block's total. Inside the block the masses
    are recomputed relative to the block's largest logit, so the block's own
    law is as precise as float32 allows however small the block's share of
    the row is, and nothing here needs the row's maximum: XLA then fuses the
    row maximum into the single pass that builds level 1.
    """
    first = k * width
    values, inside = [], []
    for j in range(width):
        col = first + j
        value, scale = leaf(row_ids, jnp.minimum(col, n - 1))
        values.append(value)
        inside.append(col < n)
    neg_inf = jnp.full(frac.shape, -jnp.inf, frac.dtype)
    top = neg_inf
    for value, ok in zip(values, inside, strict=True):
        top = jnp.maximum(top, jnp.where(ok, value, neg_inf))
    lanes, finite = [], []
    for value, ok in zip(values, inside, strict=True):
        ok = ok & (value > -jnp.inf)
        p = jnp.exp((value - top) * scale)
        lanes.append(jnp.where(ok, p, jnp.zeros_like(p)))
        finite.append(ok)
    k_in, _, _ = _pick(lanes, frac * _lane_sum(lanes), positive=finite)
    return jnp.minimum(first + k_in, n - 1)


def inverse_cdf(
    key: PRNGKey,
    logits: Array,
    shape: tuple[int, ...],
    scores: Array | None = None,
    scale: Array | None = None,
) -> tuple[Array, Array]:
    """Categorical draws by the inverse CDF of ``softmax(logits)``.

    Returns the draws (``shape``) and a batch-shaped flag that the row is
    valid (for max-shifted logits: false exactly for the rows with a NaN, a
    ``+inf`` or no finite logit, which the callers mask). The flag comes from
    the row totals, so no second pass over the logits is needed.

    Per row ``p = exp(logits)`` (max 1, no overflow); each draw takes
    ``u ~ U(0, 1)`` and returns the first index whose prefix sum exceeds
    ``u * total``. Many draws per row use the guide table (:func:`_guided`),
    few draws per row the multi-level block search (:func:`_blocked`). An
    outcome of probability 0 is never returned; a row with no positive mass
    returns an index in range.

    When the logits are ``to_logits(scores, scale)``, passing ``scores`` and
    ``scale`` too lets the bottom level read the few scores it needs instead
    of the logits, so that XLA never materialises the ``(B, n)`` logits (a
    second reader of them would force it to).
    """
    batch = logits.shape[:-1]
    num_lead, tail = split_shape(shape, batch)
    rows = flatten_rows(logits, tail)
    n = rows.shape[1]
    key = fast_key(key)
    leaf = None
    if scores is not None:
        _, _, row_scale = _logit_params(scores, scale)
        s_rows = flatten_rows(jnp.broadcast_to(scores, batch + (n,)), tail)
        row_scale = jnp.broadcast_to(row_scale, tail).reshape(-1)
        flat_scores = s_rows.reshape(-1)

        def leaf(r: Array, c: Array) -> tuple[Array, Array]:
            return _take(flat_scores, r * n + c), _take(row_scale, r)

    if num_lead * 16 <= max(n, 4 * BLOCK):
        # Rows of 512 and more: blocks of 64 halve the top level's lanes, which
        # every draw walks; measured 2-10% faster at n = 10**3 and 10**5.
        block = 2 * BLOCK if n >= 512 else BLOCK
        idx, total = _blocked(key, rows, num_lead, leaf, block)
    else:
        idx, total = _guided(key, rows, num_lead, leaf)
    # A valid row's largest logit is 0, so its total is at least 1; NaN, +inf
    # and all -inf rows give a NaN total (or 0 once the guide table has
    # dropped the NaN masses).
    finite = (total >= 1) & jnp.isfinite(total)
    return idx.astype(jnp.int32).reshape(shape), finite.reshape(tail)


# ----------------------------------------------------------------------------- auto


def choose_method(num_draws_per_row: int, n: int, num_rows: int) -> str:
    """The faster of ``"gumbel"`` and ``"inverse_cdf"`` for these static sizes.

    Gumbel-max costs ``S * n`` noise variates (a uniform and two logs each) per
    row; the inverse CDF costs ``n`` exps per row, then per draw a few gathers
    (guide table) or a walk down the block levels. Measured with
    ``python -m benchmarks crossover`` (2-core AMD EPYC, jax 0.10.2, median ms
    per call, ``B`` rows, ``S`` draws per row; full table in
    ``benchmarks/results/``):

    ====  ====  =====  ===========  ============  =======
    B     S     n      gumbel ms    inverse_cdf   faster
    ====  ====  =====  ===========  ============  =======
    1024  1     2      0.13         0.30          gumbel
    1024  1     16     0.24         0.28          gumbel
    1024  1     32     0.33         0.28          icdf
    1024  1     64     0.65         0.45          icdf
    1024  1     1024   3.9          0.95          icdf
    1024  4     2      0.39         0.27          icdf
    1024  4     32     1.25         0.54          icdf
    1024  16    4      1.39         0.37          icdf
    1024  1024  8      49.8         4.1           icdf
    1     1024  8192   27.5         0.30          icdf
    1     1..64 <=64   ~0.1         ~0.1          (dispatch-bound: a tie)
    ====  ====  =====  ===========  ============  =======

    So the Gumbel method wins only for one draw per row over at most 16
    candidates (where the inverse CDF's fixed per-row work dominates); the
    inverse CDF wins everywhere else, by up to 90x for many draws of a long
    row. ``num_rows`` does not move the crossover.
    """
    del num_rows
    if num_draws_per_row == 1 and n <= 16:
        return "gumbel"
    return "inverse_cdf"


def np_int(x) -> int:
    return int(np.asarray(x))
