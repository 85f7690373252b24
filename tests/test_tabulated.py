"""Noisy max tabulated once per row (jaxdp._tabulated): the quadrature's nodes, the
permute-and-flip and Laplace tables against exact laws in high precision, the
conditioned race, the draws' laws, the dispatch between the table and the race,
and the finite-precision guarantee."""

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.integrate
import scipy.stats
from jax.experimental import checkify
from laws import (
    assert_matches_law,
    exponential_law,
    laplace_noisy_max_law,
    permute_and_flip_law,
)

import jaxdp
from jaxdp import _logits, _noisy_max, _tabulated, _tuning
from jaxdp._random import bits64

U = 2.0**-24


# ----------------------------------------------------------------------------- exact laws


def exact_integrals(p, dps=60):
    """int_0^1 prod_{j != i} (1 - p_j t) dt for each i, expanding the polynomial in mpmath."""
    mpmath.mp.dps = dps
    ps = [mpmath.mpf(float(x)) for x in p]
    out = []
    for i in range(len(ps)):
        poly = [mpmath.mpf(1)]
        for j, a in enumerate(ps):
            if j == i:
                continue
            poly = [x - a * y for x, y in zip(poly + [0], [0] + poly, strict=True)]
        out.append(sum(c / (d + 1) for d, c in enumerate(poly)))
    return np.array([float(x) for x in out])


def exact_grouped_integrals(p, counts, dps=40):
    """int_0^1 prod_{j != i} (1 - p_j t) dt for an outcome of each group (``counts[g]``
    outcomes with acceptance probability ``p[g]``), by mpmath quadrature."""
    mpmath.mp.dps = dps
    p = [mpmath.mpf(q) for q in p]

    def integrand(t, g):
        prod = mpmath.mpf(1)
        for q, k in zip(p, counts, strict=True):
            prod *= (1 - q * t) ** k
        return prod / (1 - p[g] * t)

    return [mpmath.quad(lambda t, g=g: integrand(t, g), [0, 1]) for g in range(len(p))]


def exact_grouped_law(levels, counts, c, dps=40):
    """Permute-and-flip's law per group of equal scores (``counts[g]`` outcomes at
    score ``levels[g]``, scale ``c``), by mpmath quadrature of the grouped integrand."""
    mpmath.mp.dps = dps
    top = max(levels)
    p = [mpmath.exp(-mpmath.mpf(c) * (top - mpmath.mpf(s))) for s in levels]
    integrals = exact_grouped_integrals(p, counts, dps)
    law = [k * q * i for k, q, i in zip(counts, p, integrals, strict=True)]
    total = mpmath.fsum(law)
    assert abs(total - 1) < mpmath.mpf(10) ** -20, total
    return np.array([float(x / total) for x in law])


def laplace_grouped_law(levels, counts, b):
    """Report-noisy-max with Laplace noise of scale ``b``, per group of equal scores
    (``counts[g]`` outcomes at ``levels[g]``), float64 quadrature split at every level."""
    levels = np.asarray(levels, np.float64)
    dist = scipy.stats.laplace(scale=b)
    lo, hi = levels.min() - 60 * b, levels.max() + 60 * b
    law = []
    for g, k in enumerate(counts):
        power = np.array(counts, np.float64)
        power[g] -= 1

        def density(y, g=g, power=power):
            return dist.pdf(y - levels[g]) * np.prod(dist.cdf(y - levels) ** power)

        points = sorted(set(levels.tolist()))
        law.append(k * scipy.integrate.quad(density, lo, hi, points=points, limit=800,
                                            epsabs=1e-14)[0])  # fmt: skip
    law = np.array(law)
    assert abs(law.sum() - 1) < 1e-8, law.sum()
    return law / law.sum()


def conditional_law(scores, b):
    """Report-noisy-max with Laplace noise given that every noisy score is below the
    top score, float64 quadrature (finite scores only)."""
    s = np.asarray(scores, np.float64)
    dist = scipy.stats.laplace(scale=b)
    top = s.max()
    out = []
    for i in range(len(s)):
        others = np.delete(s, i)

        def density(y, i=i, others=others):
            return dist.pdf(y - s[i]) * np.prod(dist.cdf(y - others))

        points = sorted(set(s.tolist()))
        out.append(scipy.integrate.quad(density, top - 60 * b, top, points=points, limit=800,
                                        epsabs=1e-15)[0])  # fmt: skip
    out = np.array(out)
    return out / out.sum()


def _table_integrals(p):
    # Compiled, as the sampler runs it: XLA's simplifier acts only inside jit.
    sh, sl = jax.jit(_tabulated.flip_integrals)(jnp.asarray(p, jnp.float32)[None])
    return np.asarray(sh, np.float64)[0] + np.asarray(sl, np.float64)[0]


def _adversarial_rows():
    rng = np.random.default_rng(0)
    rows = {}
    for n in (2, 5, 17, 80):
        p = np.exp(-rng.exponential(3, size=n)).astype(np.float32)
        p[rng.integers(n)] = 1
        rows[f"random{n}"] = p
    rows["ties"] = np.ones(64, np.float32)
    rows["near_one"] = (1 - np.float32(U) * np.arange(64)).astype(np.float32)
    rows["dominant_then_tiny"] = np.r_[1, np.full(63, np.exp(-79.9))].astype(np.float32)
    rows["huge_gaps"] = np.exp(-np.array([0, 1e-6, 5, 20, 40, 60, 79.9] * 9)).astype(np.float32)
    rows["ties_and_near_ties"] = np.r_[np.ones(30), np.full(30, 1 - 2**-23), [2**-20]].astype(
        np.float32
    )
    rows["excluded"] = np.r_[1, 0.5, 0, 0, 0.25].astype(np.float32)  # -inf scores: p = 0
    return rows


# ----------------------------------------------------------------------------- nodes


@pytest.mark.parametrize("m", [1, 2, 3, 4, 7, 64, 500, 2048])
def test_gauss_legendre_nodes_relatively_exact(m):
    """Nodes to 1e-14 *relative* (also next to 0, where 1 - t from leggauss is off by
    1e-12 at m = 500), weights to 1e-10, against mpmath."""
    v, w = _tabulated.gauss_legendre(m)
    assert v.shape == w.shape == (m,)
    assert np.all(np.diff(v) > 0) and np.all(w > 0) and abs(w.sum() - 1) < 1e-15
    np.testing.assert_allclose(v, 1 - v[::-1], rtol=0, atol=1e-16)
    mpmath.mp.dps = 50
    picks = sorted({0, min(1, m - 1), m // 3, m // 2, m - 1})
    for i in picks:
        # Newton's method in mpmath on P_m(1 - 2y), from the float64 node
        y = mpmath.mpf(v[i])
        for _ in range(6):
            x = 1 - 2 * y
            pm, pm1 = mpmath.legendre(m, x), mpmath.legendre(m - 1, x)
            slope = m * (x * pm - pm1) / (x**2 - 1)  # P_m'(x)
            y = y + pm / (2 * slope)
        x = 1 - 2 * y
        slope = m * (x * mpmath.legendre(m, x) - mpmath.legendre(m - 1, x)) / (x**2 - 1)
        weight = 1 / ((1 - x**2) * slope**2)
        assert abs(float(v[i] / y - 1)) < 1e-14, (i, v[i], y)
        assert abs(float(w[i] / weight - 1)) < 1e-10, (i, w[i], weight)


@pytest.mark.parametrize("m", [1, 2, 5, 12])
def test_gauss_legendre_exact_to_degree_2m_minus_1(m):
    v, w = _tabulated.gauss_legendre(m)
    for k in range(2 * m):
        assert abs(np.sum(w * v**k) - 1 / (k + 1)) < 1e-14 * (k + 1)
    if m <= 5:  # and not beyond: the check can fail
        assert abs(np.sum(w * v ** (2 * m)) - 1 / (2 * m + 1)) > 1e-6


# ----------------------------------------------------------------------------- table


@pytest.mark.parametrize("name", sorted(_adversarial_rows()))
def test_flip_integrals_relative_error_within_bound(name):
    """Every entry of the table, however small, against the exact integral of the
    same float p (mpmath, 60 digits): relative error within table_error(n)."""
    p = _adversarial_rows()[name]
    got = _table_integrals(p)
    exact = exact_integrals(p)
    bound = _tabulated.table_error(len(p))
    err = np.abs(got / exact - 1)
    assert err.max() <= bound, (err.max(), bound)
    assert bound < 1e-9


def test_flip_integrals_negative_controls():
    """The same checks catch a quadrature with half the nodes (not exact for the
    degree), and float32 factors ``1 - p t`` (the cancellation near t = 1 that the
    pairs avoid)."""
    p = _adversarial_rows()["near_one"]
    exact = exact_integrals(p)
    bound = _tabulated.table_error(len(p))
    v, w = _tabulated.gauss_legendre(len(p) // 4)
    f = (1 - p.astype(np.float64))[None, :] + p[None, :] * v[:, None]
    short = (w[:, None] * f.prod(1)[:, None] / f).sum(0)
    assert np.abs(short / exact - 1).max() > bound
    v, w = _tabulated.gauss_legendre(len(p) // 2)
    t = (1 - v).astype(np.float32)
    f32 = (1 - p[None, :] * t[:, None]).astype(np.float64)  # float32 factors
    naive = (w[:, None] * f32.prod(1)[:, None] / f32).sum(0)
    assert np.abs(naive / exact - 1).max() > 1e3 * bound


@pytest.mark.parametrize("n", [1000, 4096])
def test_flip_table_large_rows_against_grouped_law(n):
    """Grouped scores (near-ties to gaps of 79) at the sizes the table is used for:
    each integral against mpmath quadrature of the same float p (relative error
    within table_error(n)), and each table entry against the exact law (within the
    bound plus the two final float32 roundings, twice for the normalisation)."""
    levels = [0.0, -1e-6, -1e-3, -0.5, -3.0, -30.0, -79.0]
    counts = [1, n // 8, n // 8, n // 4, n // 4, n // 8]
    counts.append(n - sum(counts))
    scores = np.repeat(np.array(levels, np.float32), counts)
    p = _tabulated.acceptance(jnp.asarray(scores)[None], jnp.zeros(1), jnp.ones(1))
    starts = np.cumsum([0] + counts[:-1])
    group_p = np.asarray(p, np.float64)[0][starts]  # the float p actually used
    exact = np.array([float(x) for x in exact_grouped_integrals(group_p, counts)])
    got = _table_integrals(np.asarray(p)[0])
    err = np.abs(got / np.repeat(exact, counts) - 1)
    assert err.max() <= _tabulated.table_error(n), (err.max(), _tabulated.table_error(n))
    table = np.asarray(jax.jit(_tabulated.flip_table)(p), np.float64)[0]
    law = np.array(counts) * group_p * exact
    law = np.repeat(law / law.sum() / np.array(counts), counts)
    err = np.abs(table / table.sum() / law - 1)
    bound = 2 * (_tabulated.table_error(n) + 2 * U)
    assert err.max() <= bound, (err.max(), bound)


# ----------------------------------------------------------------------------- draws

SCORES = np.array([0.0, 1.0, 2.0, 2.0, 3.5, -1.0])
EPS, DELTA = 1.1, 0.9


def _draw(noise, scores, eps, shape, monotonic=False, key=0):
    scale = eps / (DELTA if monotonic else 2 * DELTA)
    logits = _logits.from_scores(jnp.asarray(scores, jnp.float32), jnp.float32(scale))
    idx, ok = _tabulated.draw(jax.random.key(key), logits, shape, noise)
    assert np.all(np.asarray(ok))
    return np.asarray(idx)


@pytest.mark.parametrize("monotonic", [False, True])
def test_table_draws_permute_and_flip_law(monotonic):
    draws = _draw("exponential", SCORES, EPS, (10**6,), monotonic)
    assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):  # PF is not the exponential mechanism
        assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, permute_and_flip_law(SCORES, 0.95 * EPS, DELTA, monotonic))


def test_gumbel_noise_has_no_table():
    """Gumbel noise is drawn by the exponential mechanism's kernels
    (tests/test_noisy_max.py), never tabulated here."""
    assert not any(_tabulated.use_table("gumbel", s, 1000) for s in (2, 10**4, 10**8))
    with pytest.raises(ValueError, match="noise='gumbel'"):
        _draw("gumbel", SCORES, EPS, (10,))
    with pytest.raises(ValueError, match="noise='gumbel'"):
        _tabulated.guarantee(1000, 1.0, "gumbel")


@pytest.mark.parametrize(
    "noise,law", [("exponential", permute_and_flip_law), ("laplace", laplace_noisy_max_law)]
)
def test_table_draws_batched_rows_neg_inf_and_ties(noise, law):
    rows = np.array([[0.0, -np.inf, 2.0, 2.0, 1.0], [5.0, 5.0, 5.0, 5.0, -np.inf]])
    draws = _draw(noise, rows, 2.0, (300_000, 2), key=2)
    law0 = np.zeros(5)
    finite = np.isfinite(rows[0])
    law0[finite] = law(rows[0][finite], 2.0, DELTA)
    assert_matches_law(draws[:, 0], law0)
    assert_matches_law(draws[:, 1], np.array([1, 1, 1, 1, 0]) / 4)
    with pytest.raises(AssertionError):
        assert_matches_law(draws[:, 1], np.array([1.1, 1, 1, 1, 0]) / 4.1)


def test_public_api_large_row_grouped_law():
    """permute_and_flip at n = 512, W1 shape (the table path), grouped: chi-square
    against the exact grouped law, and the check fails at a wrong epsilon."""
    n, draws_per_row = 512, 200_000
    assert _tabulated.use_table("exponential", draws_per_row, n)
    levels, counts = [0.0, -0.5, -2.0, -6.0], [2, 10, 100, n - 112]
    scores = np.repeat(np.array(levels), counts)
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    groups = np.repeat(np.arange(len(levels)), counts)[perm]
    draws = jaxdp.permute_and_flip(
        jax.random.key(3), scores[perm], epsilon=2.0, sensitivity=1.0, shape=(draws_per_row,)
    )
    law = exact_grouped_law(levels, counts, 1.0)
    counts_seen = np.bincount(groups[np.asarray(draws)], minlength=len(levels))
    assert scipy.stats.chisquare(counts_seen, law * draws_per_row).pvalue > 1e-3
    wrong = exact_grouped_law(levels, counts, 0.95)
    assert scipy.stats.chisquare(counts_seen, wrong * draws_per_row).pvalue < 1e-3


# ----------------------------------------------------------------------------- Laplace


@pytest.mark.parametrize("name", sorted(_adversarial_rows()))
def test_laplace_table_relative_error_within_bound(name):
    """laplace_table against mpmath: entry i is (p_i / 2) int_0^1 prod_j!=i (1 - p_j t / 2),
    the last prod_j (1 - p_j / 2), on flip_table's scale, each within the stated error;
    the two parts add up to the whole law."""
    p = _adversarial_rows()[name]
    n = len(p)
    w = np.asarray(jax.jit(_tabulated.laplace_table)(jnp.asarray(p)[None]), np.float64)[0]
    half = p.astype(np.float64) / 2
    upper = half * exact_integrals(half)
    mpmath.mp.dps = 60
    below = mpmath.fprod([1 - mpmath.mpf(float(x)) for x in half])
    assert abs(mpmath.fsum([mpmath.mpf(float(x)) for x in upper]) + below - 1) < 1e-14
    below = float(below) if below >= _tabulated.PRODUCT_FLOOR else 0.0
    exact = np.r_[upper, below] * 2.0 ** math.ceil(math.log2(n))
    assert np.all(w[exact == 0] == 0)
    rel = np.abs(w[exact > 0] / exact[exact > 0] - 1)
    assert rel.max() <= _tabulated.table_error(n) + 2 * U, (rel.max(), np.argmax(rel))


def _first_stage_rows():
    rows = dict(_adversarial_rows())
    rng = np.random.default_rng(7)
    for n in (33, 1000, 4096):  # around the prefix products' block width, and large
        p = np.exp(-rng.exponential(2, size=n)).astype(np.float32)
        p[rng.integers(n)] = 1
        rows[f"random{n}"] = p
    isolated = np.exp(-30 - rng.exponential(2, size=1000)).astype(np.float32)
    isolated[3] = 1  # X* at its cap 1 / max(B, sqrt(B)): the linear region is huge
    rows["isolated1000"] = isolated
    # weights just above the floor: a top, a crowd (X* ~ 2/3), and a tail whose
    # double-float low words would be subnormal at a floor of 2**-100
    for lo, hi in ((96.8, 98.4), (74.0, 76.5)):
        tail = np.exp2(-rng.uniform(lo, hi, 1000)).astype(np.float32)
        tail[:4] = [1.0, 0.6, 0.5, 0.4]
        rows[f"tail_2^-{lo:g}"] = tail
    return rows


def _check_first_stage(p):
    """_top_split's n + 1 weights against mpmath on the returned X*: entry j is
    pi_j prod_{l<j} (1 - pi_l), pi_j = a_j X* / (2 - a_j) (0 for the top candidate),
    the last prod_l (1 - pi_l); each within u + 8 n u**2 (SECURITY.md, the first
    stage's eta_f less the alias table's part), and none dropped above FIRST_FLOOR."""
    n = len(p)
    t, x_star, w = jax.jit(_tabulated._top_split)(jnp.asarray(p))
    t, w = int(t), np.asarray(w, np.float64)
    assert t == int(np.argmax(p))
    mpmath.mp.dps = 50
    x = mpmath.mpf(float(x_star))
    left, exact = mpmath.mpf(1), []
    for j, a in enumerate(p.astype(np.float64)):
        pi = 0 if j == t else mpmath.mpf(a) * x / (2 - mpmath.mpf(a))
        exact.append(pi * left)
        left *= 1 - pi
    exact = np.array([float(e) for e in exact + [left]])
    assert abs(sum(exact) - 1) < 1e-12
    kept = exact >= _tabulated.FIRST_FLOOR * (1 + 1e-6)
    assert np.all(w[exact < _tabulated.FIRST_FLOOR * (1 - 1e-6)] == 0)
    rel = np.abs(w[kept] / exact[kept] - 1)
    assert rel.max() <= U + 8 * n * U * U, (rel.max(), np.argmax(rel))


@pytest.mark.parametrize("name", sorted(_first_stage_rows()))
def test_first_stage_table_relative_error_within_bound(name):
    _check_first_stage(_first_stage_rows()[name])


def test_first_stage_table_check_can_fail(monkeypatch):
    """The same check fails when the prefix products drop their low parts (a float32
    running product: relative error ~n u)."""

    def float32_products(hi, lo):
        out = jax.lax.associative_scan(jnp.multiply, hi)
        return out, jnp.zeros_like(out)

    monkeypatch.setattr(_tabulated, "_prefix_products", float32_products)
    jax.clear_caches()  # _top_split's compiled program holds the real products
    with pytest.raises(AssertionError):
        _check_first_stage(_first_stage_rows()["random1000"])
    jax.clear_caches()


CONDITIONED_ROWS = [
    ([0.0, -0.3, -1.0, -2.0], 1.0),
    ([0.0, -4.0, -4.5, -5.0], 1.0),
    ([0.0, -0.01, -8.0, -20.0, -np.inf, -0.5], 0.5),
    ([0.0, 0.0, 0.0], 1.0),
]


@pytest.mark.parametrize("scores,b", CONDITIONED_ROWS)
def test_conditional_race_law(scores, b):
    """conditional_race against the exact law of the winner given that every noisy score
    is below the top score (float64 quadrature), 10**6 draws in one call; a sampler with
    a scale 15 % off, and the unconditioned law, fail the same check."""
    s = np.asarray(scores, np.float64)
    finite = np.isfinite(s)
    draws = 10**6
    hi, lo = bits64(jax.random.key(11), (draws, len(s)))
    race = jax.jit(_tabulated.conditional_race)

    def run(scale):
        a = np.where(finite, np.exp(-(s.max() - s) / scale), 0).astype(np.float32)
        return np.asarray(race(jnp.broadcast_to(jnp.asarray(a), (draws, len(s))), hi, lo))

    law = np.zeros(len(s))
    law[finite] = conditional_law(s[finite], b)
    assert_matches_law(run(b), law)
    if len(set(s[finite])) > 1:
        with pytest.raises(AssertionError):
            assert_matches_law(run(1.15 * b), law)
        full = np.zeros(len(s))
        full[finite] = laplace_noisy_max_law(s[finite], 1.0, b / 2)
        with pytest.raises(AssertionError):
            assert_matches_law(run(b), full)


@pytest.fixture
def laplace_tabulated():
    """The Laplace table path through the public API on any backend: a GPU draws
    Laplace noise by the race (jaxdp._tuning.LAPLACE_BELOW_COST), so these tests
    price it there as on a CPU. The caches are cleared on both sides of the change."""
    with pytest.MonkeyPatch.context() as mp:
        cost = _tuning.LAPLACE_BELOW_COST
        mp.setitem(cost, _tuning.kind(), cost["cpu"])
        jax.clear_caches()
        yield
    jax.clear_caches()


@pytest.mark.parametrize("monotonic", [False, True])
def test_table_draws_laplace_law(monotonic):
    draws = _draw("laplace", SCORES, EPS, (10**6,), monotonic, key=5)
    assert_matches_law(draws, laplace_noisy_max_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):  # Laplace RNM is not permute-and-flip
        assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, laplace_noisy_max_law(SCORES, 0.95 * EPS, DELTA, monotonic))


def test_laplace_isolated_top_public_api(monkeypatch, laplace_tabulated):
    """A top score far above the rest: about half the draws are below it, and most of
    those are settled by the first stage of one row (the top's variable and the first
    other candidate below X*). The law holds through the public API, and a sampler
    whose conditioned variables follow the wrong law fails the same check."""
    scores = np.r_[[3.0, 0.0, 0.5, 1.0, -np.inf, 1.0, -2.0, 0.25], np.linspace(-4.0, 0.5, 12)]
    eps, draws = 2.0, 10**6
    assert _tabulated.use_table("laplace", draws, len(scores))

    def run():
        return np.asarray(
            jaxdp.report_noisy_max(
                jax.random.key(6), scores, epsilon=eps, sensitivity=1.0, shape=(draws,)
            )
        )

    law = np.zeros(len(scores))
    finite = np.isfinite(scores)
    law[finite] = laplace_noisy_max_law(scores[finite], eps, 1.0)
    assert_matches_law(run(), law)

    real = _tabulated.conditioned_constants  # the others' conditional laws at p**2
    monkeypatch.setattr(_tabulated, "conditioned_constants", lambda p: real(p * p))
    jax.clear_caches()
    with pytest.raises(AssertionError):
        assert_matches_law(run(), law)
    jax.clear_caches()


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_laplace_one_row_tied_top(eps):
    """Tied top scores: X* = 0, so every draw below the top score takes the race."""
    scores = np.array([2.0, 2.0, 0.0, 1.0, -1.0, 0.5, 2.0, -3.0])
    draws = _draw("laplace", scores, eps, (10**6,), key=12)
    assert_matches_law(draws, laplace_noisy_max_law(scores, eps, DELTA))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, laplace_noisy_max_law(scores, 0.95 * eps, DELTA))


def test_laplace_table_under_vmap(laplace_tabulated):
    """jit(vmap) over an epsilon grid and over keys, on the table path (the conditioned
    race's loop runs until the slowest member is done): each member keeps its law."""
    scores = np.array([3.0, 0.0, 0.5, 1.0, 2.5, -1.0, 1.0, 0.25] * 4)
    draws = 20_000
    assert _tabulated.use_table("laplace", draws, len(scores))

    def one(k, e):
        return jaxdp.report_noisy_max(k, scores, epsilon=e, sensitivity=1.0, shape=(draws,))

    eps = np.array([0.5, 1.0, 2.0, 4.0])
    out = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(3), 4), eps))
    for e, d in zip(eps, out, strict=True):
        assert_matches_law(d, laplace_noisy_max_law(scores, e, 1.0))
    with pytest.raises(AssertionError):  # the members are not mixed up
        assert_matches_law(out[0], laplace_noisy_max_law(scores, eps[1], 1.0))
    keys = jax.random.split(jax.random.key(4), 8)
    out = np.asarray(jax.jit(jax.vmap(lambda k: one(k, 2.0)))(keys))
    assert_matches_law(out.ravel(), laplace_noisy_max_law(scores, 2.0, 1.0))


def test_laplace_table_under_checkify_of_vmap(laplace_tabulated):
    """checkify of (nested) vmap of the table path: its loop's trip count is the batch's
    largest, so checkify sees no batched while loop; the laws hold and a traced bad
    epsilon is reported."""
    scores = np.array([3.0, 0.0, 0.5, 1.0, 2.5, -1.0, 1.0, 0.25] * 4)
    draws = 20_000

    def one(k, e):
        return jaxdp.report_noisy_max(k, scores, epsilon=e, sensitivity=1.0, shape=(draws,))

    eps = np.array([[1.0, 4.0], [2.0, 0.5]])
    keys = jax.random.split(jax.random.key(9), 4).reshape(2, 2)
    err, out = checkify.checkify(jax.jit(jax.vmap(jax.vmap(one))))(keys, eps)
    assert err.get() is None
    for e, d in zip(eps.ravel(), np.asarray(out).reshape(4, draws), strict=True):
        assert_matches_law(d, laplace_noisy_max_law(scores, e, 1.0))
    err, _ = checkify.checkify(jax.vmap(one))(keys[0], jnp.array([1.0, jnp.nan]))
    assert err.get() is not None and "epsilon" in err.get()


@pytest.mark.parametrize(
    "levels,counts,eps",
    [
        ([0.0, -0.5, -2.0, -6.0], [2, 10, 100, 888], 2.0),  # crowded top: P(max < s_1) ~ 1e-3
        ([8.0, 0.0, -1.0], [1, 20, 979], 2.0),  # isolated top: P(max < s_1) ~ 1/2
        ([0.0, -3.0, -3.2, -10.0], [1, 5, 90, 4000], 1.0),  # the largest tabulated row
    ],
)
def test_laplace_large_rows_grouped_law(levels, counts, eps, laplace_tabulated):
    """report_noisy_max(noise="laplace") on W1-shaped calls (the table path) at n = 1000
    and 4096, grouped: chi-square against the exact grouped law, and the check fails
    at a 10 % smaller epsilon."""
    n, draws_per_row = sum(counts), 400_000
    assert _tabulated.use_table("laplace", draws_per_row, n)
    scores = np.repeat(np.array(levels), counts)
    perm = np.random.default_rng(1).permutation(n)
    groups = np.repeat(np.arange(len(levels)), counts)[perm]
    draws = jaxdp.report_noisy_max(
        jax.random.key(8), scores[perm], epsilon=eps, sensitivity=1.0, shape=(draws_per_row,)
    )
    seen = np.bincount(groups[np.asarray(draws)], minlength=len(levels))
    law = laplace_grouped_law(levels, counts, 2.0 / eps)
    assert scipy.stats.chisquare(seen, law * draws_per_row).pvalue > 1e-3
    wrong = laplace_grouped_law(levels, counts, 2.0 / (0.9 * eps))
    assert scipy.stats.chisquare(seen, wrong * draws_per_row).pvalue < 1e-3


# ----------------------------------------------------------------------------- dispatch


def test_dispatch_takes_both_paths(monkeypatch, laplace_tabulated):
    """W1 shapes (many draws of a moderate row) take the table, for every noise; one draw
    per row, few draws per row and rows beyond MAX_CANDIDATES take the race."""
    calls = []
    real = _tabulated.draw

    def spy(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(_tabulated, "draw", spy)
    jax.clear_caches()
    row = jnp.linspace(-3.0, 0.0, 1000)
    kw = dict(epsilon=1.0, sensitivity=1.0)
    jaxdp.permute_and_flip(jax.random.key(0), row, shape=(10**4,), **kw)
    jaxdp.report_noisy_max(jax.random.key(0), row, noise="gumbel", shape=(10**4,), **kw)
    jaxdp.report_noisy_max(jax.random.key(0), row, noise="laplace", shape=(10**4,), **kw)
    assert calls == ["exponential", "laplace"]  # Gumbel: exponential's kernels
    jaxdp.permute_and_flip(jax.random.key(0), jnp.tile(row, (3, 1)), **kw)  # one draw per row
    jaxdp.report_noisy_max(jax.random.key(0), row, noise="laplace", shape=(1000,), **kw)
    jaxdp.permute_and_flip(jax.random.key(0), jnp.zeros(5000), shape=(10**5,), **kw)
    assert calls == ["exponential", "laplace"]
    assert not _tabulated.use_table("exponential", 1, 1000)
    assert not _tabulated.use_table("laplace", 1000, 1000)
    assert not _tabulated.use_table("laplace", 10**8, _tuning.TABLE_MAX_CANDIDATES["cpu"] + 1)
    assert _tabulated.use_table("laplace", 10**6, 1000)
    assert not _tabulated.use_table("exponential", 10**8, _tuning.TABLE_MAX_CANDIDATES["cpu"] + 1)
    assert _tabulated.use_table("exponential", 10**6, 1000)


def test_small_rows_through_the_table(monkeypatch):
    """With the kernel's draw cost set to 0 the small-row W1 calls take the table too,
    and keep the exact laws (the existing tests cover the race at these sizes)."""
    monkeypatch.setitem(_tuning.KERNEL_DRAW_COST, _tuning.kind(), 0.0)
    monkeypatch.setitem(_tuning.ALIAS_DRAW_COST, _tuning.kind(), 0.0)
    jax.clear_caches()
    noise = "exponential"
    assert _tabulated.use_table(noise, 10**5, len(SCORES))
    fn = _noisy_max.report_noisy_max
    draws = fn(
        jax.random.key(4), SCORES, epsilon=EPS, sensitivity=DELTA, noise=noise, shape=(10**5,)
    )
    assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA))
    # invalid (traced) rows give -1 on the table path as on the race
    bad = jax.jit(
        lambda s: fn(jax.random.key(0), s, epsilon=1.0, sensitivity=1.0, noise=noise, shape=(64, 2))
    )
    out = np.asarray(bad(jnp.array([[0.0, 1.0, 2.0], [np.nan, 0.0, 1.0]])))
    assert np.all(out[:, 1] == -1) and np.all(out[:, 0] >= 0)
    jax.clear_caches()


# ----------------------------------------------------------------------------- guarantee


@pytest.mark.parametrize("n", [2, 1000, _tuning.TABLE_MAX_CANDIDATES["cpu"]])
@pytest.mark.parametrize("noise", ["exponential", "laplace"])
def test_guarantee_meets_targets(n, noise):
    eps, delta = _tabulated.guarantee(n, 1.0, noise)
    assert 1.0 < eps <= 1.0 + 1e-5 and 0 < delta <= 1e-10
    large = 4.9 if noise == "laplace" else 5.0  # Laplace: n (n + 1) 2**-65 (1 + e**ε)
    eps, delta = _tabulated.guarantee(n, large, noise)
    assert large < eps <= large + 1e-5 and 0 < delta <= 1e-10
    if noise == "exponential":
        assert _tabulated.table_error(n) < 1e-8
