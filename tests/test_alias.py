"""The alias table (jaxdp._alias), the categorical kernel's path for many draws per
row: its implemented law computed exactly from the stored tables, the privacy of
that law on adversarial neighbours, the sampled law at every table size, and the
dispatch between it and the descent."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxdp
from jaxdp import _alias, _descent, _threefry, _tuning

# The CPU's layout rules on every backend: these tests reach each layout through them.
pytestmark = pytest.mark.usefixtures("cpu_layout_rules")


def implemented_law(w):
    """The exact law of :func:`_alias.draw` for the tables built from ``w`` ``(n,)``,
    in float64: column ``j`` keeps ``j`` with probability ``t_j`` (its 64 - b bit
    threshold) and gives the rest to its alias."""
    # Compiled, as the sampler runs it: XLA's simplifier acts only inside jit.
    packed, low, ok = (np.asarray(x)[0] for x in jax.jit(_alias.build)(jnp.asarray(w)[None]))
    size = packed.shape[0]
    b = int(math.log2(size))
    high = (packed >> np.uint32(b)).astype(np.float64)
    alias = (packed & np.uint32(size - 1)).astype(np.int64)
    t = (high * 2.0**32 + low.astype(np.float64)) / 2.0 ** (64 - b)
    p = np.zeros(size)
    np.add.at(p, np.arange(size), t)
    np.add.at(p, alias, 1 - t)
    return p / size, bool(ok)


def _weights(scores, eps, monotonic=False, sensitivity=1.0):
    scores = jnp.asarray(scores, jnp.float32)
    c = _descent.scale_down(
        jnp.float32(eps) / jnp.float32(sensitivity if monotonic else 2 * sensitivity)
    )
    return jax.jit(_descent.weights)(scores[None], scores.max()[None], c[None])[0]


def _exact(scores, eps, monotonic=False):
    s = np.asarray(scores, np.float64)
    logits = eps * (s - s.max()) / (1.0 if monotonic else 2.0)
    p = np.exp(logits)
    return p / p.sum()


ROWS = {
    "one": [0.0],
    "two": [0.0, -1.0],
    "three": [0.0, -1.0, -2.0],
    "uniform": np.zeros(1000),
    "normal": np.random.default_rng(0).normal(size=1000) * 20,
    "dominant then tiny": np.r_[0.0, np.full(4095, -170.0)],
    "tiny then dominant": np.r_[np.full(500, -150.0), 0.0, np.full(523, -60.0)],
    "ties at one column": np.r_[np.zeros(512), np.full(512, -1e-7)],
    "wide": -np.random.default_rng(1).exponential(size=2**17) * 30,
    # The largest table: compiled, its double-float column masses were once 793u off.
    "wide, 2**20 columns": -np.random.default_rng(1).exponential(size=2**20) * 30,
}


@pytest.mark.parametrize("name", list(ROWS))
def test_implemented_law_is_within_the_bound(name):
    """Every outcome's implemented probability is within the relative bound of
    the weights' law, and the absolute leftovers sum below the stated δ'."""
    scores = np.asarray(ROWS[name], np.float32)
    n = scores.size
    w = np.asarray(_weights(scores, 2.0), np.float64)
    p, ok = implemented_law(w.astype(np.float32))
    assert ok
    assert np.all(p[n:] == 0)  # padding columns are never drawn
    p, q = p[:n], w / w.sum()
    b = _alias.log2_columns(n)
    a_t = _alias.table_error(b)
    grid = 2.0**-64  # one unit of the fixed point, in probability
    excess = np.abs(p - q) - a_t * q
    assert np.all(excess <= 2 * grid), excess.max() / grid
    assert np.sum(np.maximum(excess, 0)) <= 2.0 ** (b - 63)
    eps_p, delta_p = _alias.guarantee(n, 2.0, 6 * 2.0**-24)
    assert np.sum(np.maximum(excess, 0)) * (1 + math.exp(eps_p)) <= delta_p


def test_implemented_law_catches_a_wrong_table():
    """The check above fails for a table built from slightly wrong weights."""
    w = np.asarray(_weights(ROWS["normal"], 2.0), np.float64)
    p, _ = implemented_law((w * (1 + 1e-6 * np.arange(w.size) / w.size)).astype(np.float32))
    q = w / w.sum()
    pos = q > 0
    assert np.max(np.abs(p[: w.size][pos] / q[pos] - 1)) > 1e-7


def _privacy_loss(pa, pb, eps_prime):
    both = (pa > 0) & (pb > 0)
    ratio = np.max(np.abs(np.log(pa[both] / pb[both])))
    delta = max(
        np.sum(np.maximum(pa - math.exp(eps_prime) * pb, 0)),
        np.sum(np.maximum(pb - math.exp(eps_prime) * pa, 0)),
    )
    return ratio, delta


@pytest.mark.parametrize("n", [4096, 2**20])
def test_finding_one_exactly(n):
    """Issue 10's rounding attack (D = [17, 0, ...], D' = [17, 1, ...], monotonic,
    ε = 1): the implemented laws on both sides, computed exactly, are within the
    stated (ε', δ'); no outcome is impossible on one side only."""
    d = np.zeros(n, np.float32)
    d[0] = 17
    d2 = np.ones(n, np.float32)
    d2[0] = 17
    eps_p, delta_p = _descent.guarantee(n, 1.0)
    pa, _ = implemented_law(_weights(d, 1.0, monotonic=True))
    pb, _ = implemented_law(_weights(d2, 1.0, monotonic=True))
    pa, pb = pa[:n], pb[:n]
    assert np.all(pa > 0) and np.all(pb > 0)
    ratio, delta = _privacy_loss(pa, pb, eps_p)
    assert ratio <= eps_p
    assert delta <= delta_p


def test_dominant_outcome_then_tiny_ones_exactly():
    """Neighbours that move a dominant outcome by Δ over 2**20 - 1 tiny ones."""
    n = 2**20 - 3
    a = np.full(n, -40.0, np.float32)
    a[7] = 0.0
    b = a.copy()
    b[7] = 1.0
    eps_p, delta_p = _descent.guarantee(n, 1.0)
    pa, _ = implemented_law(_weights(a, 1.0))
    pb, _ = implemented_law(_weights(b, 1.0))
    ratio, delta = _privacy_loss(pa[:n], pb[:n], eps_p)
    assert ratio <= eps_p and delta <= delta_p


# ----------------------------------------------------------------------------- sampled law

# One size per table width the dispatcher can build for (b = 2..20), at the
# boundaries: every layout of the alias path is drawn from.
ALIAS_SIZES = [1, 4, 5] + [2**b + 1 for b in range(3, 20)] + [2**20]


def test_alias_sizes_cover_every_width():
    widths = {_alias.log2_columns(n) for n in ALIAS_SIZES}
    assert widths == set(range(2, _alias.MAX_LOG2_COLUMNS + 1))


def _grouped_law(n, eps, num_groups=10):
    num_groups = min(n, num_groups)
    g = np.arange(n) * num_groups // n
    sizes = np.bincount(g, minlength=num_groups).astype(np.float64)
    scores = -np.arange(num_groups) / 2.0
    p = sizes * np.exp(eps * scores / 2)
    return g, jnp.asarray(scores[g], jnp.float32), p / p.sum()


@pytest.mark.parametrize("n", ALIAS_SIZES)
def test_alias_law_every_width(n, monkeypatch):
    eps = 2.0
    g, scores, probs = _grouped_law(n, eps)
    draws = max(200_000, n // 2)
    # The table at every width, with fewer draws than the rule asks for at the largest.
    monkeypatch.setitem(_tuning.ALIAS_DRAWS_PER_COLUMN, _tuning.kind(), ((1, 0.0),))
    monkeypatch.setitem(
        _tuning.HYBRID, _tuning.kind(), dict(_tuning.HYBRID[_tuning.kind()], bands=())
    )
    jax.clear_caches()
    assert _tuning.layout(n, draws) == "alias"
    key = jax.random.key(n)
    r = jaxdp.exponential(key, scores, epsilon=eps, sensitivity=1.0, shape=(draws,))
    r = np.asarray(r)
    assert r.min() >= 0 and r.max() < n
    counts = np.bincount(g[r], minlength=len(probs))
    if len(probs) == 1:
        assert counts[0] == draws
        return
    assert scipy.stats.chisquare(counts, probs * draws).pvalue > 1e-4


def test_alias_law_test_can_fail():
    """The same test against a deliberately wrong table (weights to the power
    1.01) rejects."""
    n = 1025
    g, scores, probs = _grouped_law(n, 2.0)
    w = _weights(scores, 2.0) ** 1.01
    r, _ = _alias.sample(_threefry.fast_key(jax.random.key(3)), w[None], 2_000_000)
    counts = np.bincount(g[np.asarray(r).ravel()], minlength=len(probs))
    assert scipy.stats.chisquare(counts, probs * counts.sum()).pvalue < 1e-6


def test_many_rows_each_many_draws():
    """Several rows with different laws in one table batch: rows do not mix."""
    n, draws = 300, 50_000
    rows = np.stack([np.linspace(0, -k, n) for k in (1.0, 5.0, 20.0)]).astype(np.float32)
    r = jaxdp.exponential(jax.random.key(5), rows, epsilon=1.0, sensitivity=1.0, shape=(draws, 3))
    r = np.asarray(r)
    for k in range(3):
        p = _exact(rows[k], 1.0)
        counts = np.bincount(r[:, k], minlength=n)
        big = p * draws >= 5
        obs, exp = counts[big], p[big] * draws
        if not big.all():
            obs, exp = np.r_[obs, counts[~big].sum()], np.r_[exp, p[~big].sum() * draws]
        assert scipy.stats.chisquare(obs, exp).pvalue > 1e-4


def test_alias_edge_rows():
    """A row with one positive weight, rows of NaN/inf (invalid), zero weights."""
    w = jnp.asarray(
        [
            [0.0, 0.0, 1.0, 0.0, 0.0],
            [1.0, jnp.nan, 1.0, 1.0, 1.0],
            [0.0] * 5,
            [1.0, jnp.inf, 0, 0, 0],
        ],
        jnp.float32,
    )
    r, ok = _alias.sample(jax.random.key(0), w, 1000)
    assert list(np.asarray(ok)) == [True, False, False, False]
    assert np.all(np.asarray(r)[:, 0] == 2)


@pytest.mark.parametrize("n", [3, 5, 9, 17, 32])
def test_select_lookup_draws_what_the_gather_draws(n, monkeypatch):
    """One row's small table read by selects (``ALIAS_SELECT_MAX_LOG2``) gives the
    gather's draws, bit for bit: for one row, under a ``vmap`` over tables and
    keys, and over keys alone; the law tests above then cover both lookups. A
    second row keeps the gather."""
    rng = np.random.default_rng(n)
    w = (rng.exponential(size=(4, n)) ** 3).astype(np.float32)
    w[1, rng.integers(n)] = 0.0
    packed, low, ok = jax.jit(_alias.build)(jnp.asarray(w))
    assert bool(ok.all())
    key = jax.random.key(n)
    keys = jax.random.split(key, 4)
    kind = _tuning.kind()

    def draws(limit):  # traced afresh under each limit
        monkeypatch.setitem(_tuning.ALIAS_SELECT_MAX_LOG2, kind, limit)
        one = jax.jit(lambda k, p, lo: _alias.draw(k, p, lo, 5000))
        by_row = jax.vmap(one)(keys, packed[:, None], low[:, None])
        shared = jax.vmap(lambda k: one(k, packed[:1], low[:1]))(keys)
        jaxpr = str(jax.make_jaxpr(one)(key, packed[:1], low[:1]))
        return [np.asarray(x) for x in (one(key, packed[:1], low[:1]), by_row, shared)], jaxpr

    (select, select_jaxpr), (gather, gather_jaxpr) = draws(63), draws(-1)
    assert "gather" not in select_jaxpr and "gather" in gather_jaxpr  # both lookups ran
    for a, b in zip(select, gather, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.bincount(select[1][1].ravel(), minlength=n)[w[1] == 0].sum() == 0  # weight 0
    # Two rows in one call: the gather under either limit.
    two = jax.jit(lambda k, p, lo: _alias.draw(k, p, lo, 100))
    assert "gather" in str(jax.make_jaxpr(two)(key, packed[:2], low[:2]))


# ----------------------------------------------------------------------------- dispatch


def test_dispatch_enumerates_every_layout():
    """The three layouts are reachable and each is chosen where its cost is lower:
    few draws per row (or rows past 2**20) take the descent, many the table, and
    at least 1000 outcomes drawn a quarter to four times per column in one row
    (a half to four times in several) the hybrid; from 4096 outcomes and 1000
    draws in up to 32 rows, a deeper hybrid (tests/test_deep_hybrid.py)."""
    layout = _tuning.layout
    assert layout(1000, 1) == "descent"
    assert layout(1000, 255) == "descent"
    assert layout(1000, 256) == "hybrid"  # a quarter of N = 1024
    assert layout(1000, 4095) == "hybrid"
    assert layout(1000, 4096) == "alias"
    assert layout(1000, 511, num_rows=2) == "descent"  # several rows: the hybrid
    assert layout(1000, 512, num_rows=2) == "hybrid"  # from N/2 to 4N
    assert layout(1000, 4095, num_rows=256) == "hybrid"
    assert layout(1000, 4096, num_rows=256) == "alias"
    assert layout(999, 1023, num_rows=8) == "descent"  # below 1000: the table from 2N
    assert layout(999, 2048, num_rows=8) == "alias"
    assert layout(999, 2047, num_rows=8) == "descent"
    assert layout(999, 1024) == "alias"  # below 1000 outcomes the table takes it
    assert layout(100, 127) == "descent"  # one row: from 128 draws (ALIAS_MIN_DRAWS)
    assert layout(100, 128) == "alias"
    assert layout(600, 255) == "descent"  # and a quarter draw per column
    assert layout(600, 256) == "alias"
    assert layout(10**5, 10**4) == "hybrid"  # C4 at n = 10**5: a deeper hybrid (depth 2)
    assert _tuning.hybrid_depth(10**5, 10**4) == 2
    assert layout(10**5, 999) == "descent"  # too few draws for any table to pay
    assert layout(10**5, 10**4, num_rows=33) == "descent"  # more rows than measured
    assert layout(10**6, 2**20) == "hybrid"
    assert layout(2**20 + 1, 2**21) == "descent"  # past the largest table
    assert not _tuning.use_alias(1000, 1)
    assert not _tuning.use_alias(1000, 4)
    assert _tuning.use_alias(1000, 10**4)
    assert _tuning.use_alias(1000, 256)  # one row: from a quarter draw per column
    assert not _tuning.use_alias(1000, 255)
    assert _tuning.use_alias(1000, 2048, num_rows=2)  # several rows: from two draws
    assert not _tuning.use_alias(1000, 2047, num_rows=300)
    assert _tuning.use_alias(10**6, 2**20)
    assert not _tuning.use_alias(10**6, 2**18 - 1)
    assert not _tuning.use_alias(2**20 + 1, 10**8)
    assert not _tuning.use_alias(2, 127)  # fewer than ALIAS_MIN_DRAWS (one row)
    assert _tuning.use_alias(2, 128)
    assert not _tuning.use_alias(2, 7, num_rows=2)  # several rows: from 8 draws
    assert _tuning.use_alias(2, 8, num_rows=2)
    # Every size of the descent's law tests (tests/test_descent.py) with one draw
    # takes the descent; the alias sizes above take the table.
    from test_descent import SIZES

    assert all(layout(n, 1) == "descent" for n in SIZES)
    assert all(layout(n, max(8 * max(n, 4), 128)) == "alias" for n in ALIAS_SIZES)


# ----------------------------------------------------------------------------- fixed point


def _u64(pair):
    high, low = (np.asarray(x).astype(np.uint64) for x in pair)
    return (high << np.uint64(32)) | low


@pytest.mark.parametrize("block", [0, 4, 16, 32])
@pytest.mark.parametrize("b", [2, 3, 4, 5, 10, 17, 20])
def test_prefix_sums_are_exact(b, block, monkeypatch):
    """The limb prefix sums equal numpy's uint64 cumsum, at the largest values the
    table can hold (a total just below 2**64), by one ``cumsum`` (block 0) and by
    blocked integer products of every depth (``PREFIX_SUM_BLOCK``: 4 to 32, one
    level up to five)."""
    monkeypatch.setitem(_tuning.PREFIX_SUM_BLOCK, _tuning.kind(), block)
    size = 2**b
    rng = np.random.default_rng(b)
    x = rng.integers(0, 2**64 // size, size=(2, size), dtype=np.uint64)
    x[1, :] = 2**64 // size - 1  # the largest entries whose total still fits
    pair = (
        jnp.asarray(x >> np.uint64(32), jnp.uint32),
        jnp.asarray(x & np.uint64(2**32 - 1), jnp.uint32),
    )
    got = _u64(jax.jit(lambda p: _alias._cumsum64(p, b))(pair))  # traced under this block
    assert np.array_equal(got, np.cumsum(x, axis=-1, dtype=np.uint64))


@pytest.mark.parametrize("block", [2, 16, 32])
@pytest.mark.parametrize("n", [1, 2, 16, 17, 48, 512, 4096])
def test_int32_prefix_sums_at_the_largest_total(n, block, monkeypatch):
    """``prefix_sums`` of non-negative int32 along the last axis, under a ``vmap``
    too, equals numpy's cumsum where the total is ``2**31 - 1``: any block size,
    lengths that are and are not multiples of it (those take one ``cumsum``)."""
    monkeypatch.setitem(_tuning.PREFIX_SUM_BLOCK, _tuning.kind(), block)
    rng = np.random.default_rng(n)
    x = np.zeros((3, n), np.int64)
    x[0] = rng.integers(0, 2**31 // n, size=n)
    x[1] = (2**31 - 1) // n  # every entry as large as it may be
    x[1, -1] += (2**31 - 1) - x[1].sum()
    x[2, rng.integers(0, n)] = 2**31 - 1  # one entry carries the whole total
    want = np.cumsum(x, axis=-1)
    assert want.max() == 2**31 - 1
    xs = jnp.asarray(x, jnp.int32)
    assert np.array_equal(np.asarray(jax.jit(lambda v: _alias.prefix_sums(v))(xs)), want)
    assert np.array_equal(np.asarray(jax.jit(jax.vmap(_alias.prefix_sums))(xs)), want)


def test_fixed_point_is_within_two_units():
    """A double-float (hi, lo) to 64-bit fixed point: floor(g 2**frac) within two units,
    for lo of either sign, values near the top of the range and zero."""
    from fractions import Fraction

    frac = 44
    rng = np.random.default_rng(0)
    hi = np.r_[rng.uniform(0, 2**20 - 1, 500), rng.uniform(0, 1, 500), 0.0, 2**20 - 1].astype(
        np.float32
    )
    lo = (hi * np.float32(2**-25) * rng.uniform(-1, 1, hi.size)).astype(np.float32)
    lo[hi == 0] = 0
    got = _u64(jax.jit(_alias._to_fixed, static_argnums=2)(jnp.asarray(hi), jnp.asarray(lo), frac))
    for h, low, g in zip(hi, lo, got, strict=True):
        exact = (Fraction(float(h)) + Fraction(float(low))) * 2**frac
        assert abs(Fraction(int(g)) - exact) <= 2, (h, low)


@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("batched", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1),
                                     (0, 1, 1), (1, 1, 1)])  # fmt: skip
def test_take_rows_under_vmap_equals_the_loop(batched, clip):
    """``take_rows`` under one and two nested ``vmap``s, every pattern of batched
    arguments, equals ``table[rows, cols]`` taken one batch entry at a time; a
    batched table joins the batch to its rows, so the gather has no batching
    dimensions (which XLA:CPU expands into indices built by concatenation, the
    cost it exists to remove)."""
    rng = np.random.default_rng(sum(batched))
    outer, inner, r, n, m = 2, 3, 4, 5, 6
    table = rng.normal(size=(outer, inner, r, n)).astype(np.float32)
    rows = rng.integers(0, r, (outer, inner, m, 2)).astype(np.int32)
    cols = rng.integers(0, n, (outer, inner, m, 2)).astype(np.int32)
    args = [a if b else a[0, 0] for a, b in zip((table, rows, cols), batched, strict=True)]
    axes = [0 if b else None for b in batched]

    def take(t, i, j):
        return _alias.take_rows(t, i, j, clip=clip)

    once = jax.vmap(take, in_axes=axes)
    twice = jax.jit(jax.vmap(jax.vmap(take, in_axes=axes), in_axes=axes))
    for a in range(outer):
        one = once(*[x[a] if b else x for x, b in zip(args, batched, strict=True)])
        for i in range(inner):
            t, ri, ci = (x[a, i] if b else x for x, b in zip(args, batched, strict=True))
            np.testing.assert_array_equal(np.asarray(one[i]), t[ri, ci])
    got = np.asarray(twice(*args))
    for a in range(outer):
        for i in range(inner):
            t, ri, ci = (x[a, i] if b else x for x, b in zip(args, batched, strict=True))
            np.testing.assert_array_equal(got[a, i], t[ri, ci])
    if batched[0]:  # one 1-D gather without batching dimensions
        assert "operand_batching_dims" not in twice.lower(*args).as_text()


@pytest.mark.parametrize("batched", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1),
                                     (0, 1, 1), (1, 1, 1)])  # fmt: skip
def test_take_blocks_under_vmap_equals_the_loop(batched):
    """``take_blocks`` (a gather of ``width``-wide slices) equals ``table[rows, blocks *
    width + j]`` taken one batch entry at a time, under one and two nested ``vmap``s
    and every pattern of batched arguments, with no batching dimensions in the
    gather when the table is batched."""
    rng = np.random.default_rng(10 + sum(batched))
    outer, inner, r, width, nb, m = 2, 3, 4, 4, 3, 6
    table = rng.normal(size=(outer, inner, r, width * nb)).astype(np.float32)
    rows = rng.integers(0, r, (outer, inner, m, 2)).astype(np.int32)
    blocks = rng.integers(0, nb, (outer, inner, m, 2)).astype(np.int32)
    args = [a if b else a[0, 0] for a, b in zip((table, rows, blocks), batched, strict=True)]
    axes = [0 if b else None for b in batched]

    def take(t, i, j):
        return _alias.take_blocks(t, i, j, width)

    def expected(t, i, j):
        return t[i[..., None], j[..., None] * width + np.arange(width)]

    once = jax.vmap(take, in_axes=axes)
    twice = jax.jit(jax.vmap(jax.vmap(take, in_axes=axes), in_axes=axes))
    got = np.asarray(twice(*args))
    for a in range(outer):
        one = once(*[x[a] if b else x for x, b in zip(args, batched, strict=True)])
        for i in range(inner):
            t, ri, bi = (x[a, i] if b else x for x, b in zip(args, batched, strict=True))
            np.testing.assert_array_equal(np.asarray(one[i]), expected(t, ri, bi))
            np.testing.assert_array_equal(got[a, i], expected(t, ri, bi))
    np.testing.assert_array_equal(take(*(a[0, 0] for a in (table, rows, blocks))),
                                  expected(*(a[0, 0] for a in (table, rows, blocks))))  # fmt: skip
    if batched[0]:
        assert "operand_batching_dims" not in twice.lower(*args).as_text()
