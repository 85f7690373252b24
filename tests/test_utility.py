"""Tests of jaxdp.utility: utility bounds and exact laws / expected gaps."""

from __future__ import annotations

import inspect
import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.stats

import jaxdp
from jaxdp import utility

RNG = np.random.default_rng(0)
SCORES6 = np.array([3.0, 1.0, 2.5, -1.0, 3.0, 0.2])  # a tie at the top


# ----------------------------------------------------------------------------- references


def pf_by_permutations(scores, epsilon, sensitivity):
    """The permute-and-flip law by enumerating every order (McKenna & Sheldon, Alg. 1)."""
    s = np.asarray(scores, np.float64)
    q = np.exp(epsilon * (s - s.max()) / (2 * sensitivity))
    probs = np.zeros(s.size)
    for order in itertools.permutations(range(s.size)):
        reject = 1.0
        for r in order:
            probs[r] += reject * q[r]
            reject *= 1 - q[r]
    return probs / math.factorial(s.size)


def pf_by_exact_polynomial(scores, epsilon):
    """p_r = q_r * integral_0^1 prod_{j != r} (1 - q_j z) dz, in exact rational arithmetic."""
    s = np.asarray(scores, np.float64)
    q = [Fraction(float(v)) for v in np.exp(epsilon * (s - s.max()) / 2)]
    out = []
    for r in range(len(q)):
        coeffs = [Fraction(1)]
        for j, qj in enumerate(q):
            if j != r:
                coeffs = [a - qj * b for a, b in zip(coeffs + [0], [0] + coeffs, strict=True)]
        out.append(float(q[r] * sum(c / (i + 1) for i, c in enumerate(coeffs))))
    return np.array(out)


def rnm_laplace_by_quad(scores, epsilon, sensitivity):
    b = 2 * sensitivity / epsilon
    u = np.asarray(scores, np.float64) / b
    lap = scipy.stats.laplace

    def prob(r):
        def f(x):
            others = [lap.cdf(x - u[j]) for j in range(u.size) if j != r]
            return lap.pdf(x - u[r]) * np.prod(others)

        lo, hi = u.max() - 60, u.max() + 60
        return scipy.integrate.quad(f, lo, hi, points=sorted(u), limit=400, epsabs=1e-15)[0]

    return np.array([prob(r) for r in range(u.size)])


def assert_law(draws, probs, alpha=1e-3):
    counts = np.bincount(np.asarray(draws).ravel(), minlength=len(probs))
    assert counts[probs == 0].sum() == 0
    keep = probs * counts.sum() > 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * counts.sum()
    pvalue = scipy.stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue
    assert pvalue > alpha, (pvalue, obs, exp)


# ----------------------------------------------------------------------------- bounds


def test_exponential_utility_bound_worked_examples():
    # Dwork & Roth Thm 3.11: g = (2 Delta / eps) (ln(|R| / |R_OPT|) + t)
    assert utility.exponential_utility_bound(1.0, 1.0, 1000, 3.0) == pytest.approx(
        2 * (math.log(1000) + 3)
    )
    assert utility.exponential_utility_bound(0.5, 2.0, 100, 1.0, 4) == pytest.approx(
        8 * (math.log(25) + 1)
    )
    mono = utility.exponential_utility_bound(0.5, 2.0, 100, 1.0, 4, monotonic=True)
    assert mono == pytest.approx(4 * (math.log(25) + 1))
    g = utility.exponential_utility_bound(np.array([0.5, 1.0]), 1.0, 10, np.array([[0.0], [1.0]]))
    assert g.shape == (2, 2)
    np.testing.assert_allclose(g, 2 / np.array([0.5, 1.0]) * (math.log(10) + np.array([[0], [1]])))


@pytest.mark.parametrize("n", [2, 10, 300])
def test_utility_bound_holds_for_exact_law_and_is_nearly_tight(n):
    t = np.linspace(0.0, 8.0, 17)
    eps = 0.7
    for scores in [RNG.normal(size=n) * 20, -np.arange(n, dtype=np.float64), np.zeros(n)]:
        p = utility.exponential_probs(scores, epsilon=eps, sensitivity=1.0)
        gaps = scores.max() - scores
        num_opt = int(np.sum(gaps == 0))
        g = utility.exponential_utility_bound(eps, 1.0, n, t, num_opt)
        tail = np.array([p[gaps >= gi].sum() for gi in g])
        assert np.all(tail <= np.exp(-t) * (1 + 1e-12))
    # the worst case: one optimum, all others exactly at OPT - g(t)
    for ti in (1.0, 4.0):
        gi = utility.exponential_utility_bound(eps, 1.0, n, ti)
        scores = np.concatenate([[0.0], np.full(n - 1, -gi)])
        p = utility.exponential_probs(scores, epsilon=eps, sensitivity=1.0)
        assert np.exp(-ti) * 0.5 * (n - 1) / n < p[1:].sum() <= np.exp(-ti)


def test_laplace_tail_bound():
    alpha = utility.laplace_tail_bound(0.5, 1.0, 0.05)
    assert alpha == pytest.approx(2 * math.log(20))
    # exact for one query: P[|Lap(b)| >= alpha] = beta
    assert 2 * scipy.stats.laplace.sf(alpha, scale=2.0) == pytest.approx(0.05)
    # union bound for k queries
    a10 = utility.laplace_tail_bound(0.5, 1.0, 0.05, 10)
    p_max = 1 - (1 - 2 * scipy.stats.laplace.sf(a10, scale=2.0)) ** 10
    assert p_max <= 0.05 and p_max == pytest.approx(0.05, rel=0.03)
    arr = utility.laplace_tail_bound(np.array([1.0, 2.0]), 1.0, np.array([0.1, 0.01]))
    np.testing.assert_allclose(arr, np.log([10.0, 100.0]) / np.array([1.0, 2.0]))


# ----------------------------------------------------------------------------- laws


def test_exponential_probs_match_jaxdp_log_probs():
    scores = np.concatenate([RNG.normal(size=20) * 5, [-np.inf]])
    with jax.enable_x64():
        ref = np.exp(
            np.asarray(
                jaxdp.exponential_log_probs(jnp.asarray(scores), epsilon=0.8, sensitivity=2.0)
            )
        )
    p = utility.exponential_probs(scores, epsilon=0.8, sensitivity=2.0)
    np.testing.assert_allclose(p, ref, rtol=1e-13, atol=1e-300)
    assert p[-1] == 0.0


def test_permute_and_flip_probs_match_enumeration_and_exact_integral():
    p = utility.permute_and_flip_probs(SCORES6, epsilon=1.3, sensitivity=1.0)
    np.testing.assert_allclose(p, pf_by_permutations(SCORES6, 1.3, 1.0), rtol=1e-12, atol=1e-15)
    assert p.sum() == pytest.approx(1.0, abs=1e-14) and p[0] == p[4]
    # beyond the single-panel exact regime (n = 60 > 40): still 1e-12
    scores = RNG.normal(size=60) * 4
    exact = pf_by_exact_polynomial(scores, 1.0)
    p = utility.permute_and_flip_probs(scores, epsilon=1.0, sensitivity=1.0)
    np.testing.assert_allclose(p, exact, rtol=1e-10, atol=1e-16)
    # -inf outcomes are never selected; monotonic is sensitivity halved
    with_inf = utility.permute_and_flip_probs(
        np.append(SCORES6, -np.inf), epsilon=1.3, sensitivity=1.0
    )
    assert with_inf[-1] == 0 and np.allclose(with_inf[:-1], pf_by_permutations(SCORES6, 1.3, 1.0))
    mono = utility.permute_and_flip_probs(SCORES6, epsilon=1.3, sensitivity=1.0, monotonic=True)
    np.testing.assert_allclose(mono, pf_by_permutations(SCORES6, 1.3, 0.5), rtol=1e-12)


def test_report_noisy_max_laplace_probs_match_quadrature_and_closed_form():
    p = utility.report_noisy_max_probs(SCORES6, epsilon=0.9, sensitivity=1.0)
    np.testing.assert_allclose(p, rnm_laplace_by_quad(SCORES6, 0.9, 1.0), rtol=1e-9, atol=1e-14)
    # two outcomes at logit distance d: P[second] = (2 + d) e^{-d} / 4
    for d in (0.1, 1.0, 7.5):
        p2 = utility.report_noisy_max_probs([0.0, -2 * d], epsilon=1.0, sensitivity=1.0)
        assert p2[1] == pytest.approx((2 + d) * math.exp(-d) / 4, rel=1e-12)
    gumbel = utility.report_noisy_max_probs(SCORES6, epsilon=0.9, sensitivity=1.0, noise="gumbel")
    np.testing.assert_array_equal(
        gumbel, utility.exponential_probs(SCORES6, epsilon=0.9, sensitivity=1.0)
    )
    expo = utility.report_noisy_max_probs(
        SCORES6, epsilon=0.9, sensitivity=1.0, noise="exponential"
    )
    np.testing.assert_array_equal(
        expo, utility.permute_and_flip_probs(SCORES6, epsilon=0.9, sensitivity=1.0)
    )


@pytest.mark.parametrize(
    ("sampler", "law"),
    [
        (jaxdp.permute_and_flip, utility.permute_and_flip_probs),
        (jaxdp.report_noisy_max, utility.report_noisy_max_probs),
    ],
)
def test_samplers_follow_the_exact_laws(sampler, law):
    scores = np.array([0.0, -0.5, -1.0, -2.0, -3.0, -5.0, -8.0, -np.inf])
    draws = sampler(
        jax.random.key(0), jnp.asarray(scores), epsilon=1.0, sensitivity=1.0, shape=(200_000,)
    )
    assert_law(draws, law(scores, epsilon=1.0, sensitivity=1.0))
    with pytest.raises(AssertionError):
        assert_law(draws, law(scores, epsilon=0.9, sensitivity=1.0))


# ----------------------------------------------------------------------------- gaps


def test_expected_gaps_two_outcomes_closed_forms():
    for g, eps in [(2.0, 1.0), (0.3, 4.0), (10.0, 0.1)]:
        q = math.exp(-eps * g / 2)
        kw = dict(epsilon=eps, sensitivity=1.0)
        assert utility.exponential_expected_gap([0.0, -g], **kw) == pytest.approx(g * q / (1 + q))
        assert utility.permute_and_flip_expected_gap([0.0, -g], **kw) == pytest.approx(g * q / 2)
        d = eps * g / 2
        assert utility.report_noisy_max_expected_gap([0.0, -g], **kw) == pytest.approx(
            g * (2 + d) * math.exp(-d) / 4, rel=1e-11
        )


def test_expected_gaps_equal_sum_of_probs_times_gaps():
    scores = np.append(RNG.normal(size=30) * 3, -np.inf)
    gaps = scores.max() - scores
    fin = np.isfinite(scores)
    kw = dict(epsilon=0.6, sensitivity=1.0)
    for gap_fn, probs_fn in [
        (utility.exponential_expected_gap, utility.exponential_probs),
        (utility.permute_and_flip_expected_gap, utility.permute_and_flip_probs),
        (utility.report_noisy_max_expected_gap, utility.report_noisy_max_probs),
    ]:
        p = probs_fn(scores, **kw)
        assert gap_fn(scores, **kw) == pytest.approx(np.sum(p[fin] * gaps[fin]), rel=1e-11)
    assert utility.permute_and_flip_expected_gap(np.zeros(5), **kw) == 0.0


def test_permute_and_flip_never_worse_than_exponential():
    # McKenna & Sheldon 2020, Thm 2, on random and structured score vectors
    for n in (2, 5, 50, 400):
        for scores in (RNG.normal(size=n) * 10, -np.arange(n, dtype=np.float64)):
            for eps in (0.01, 0.3, 1.0, 5.0):
                kw = dict(epsilon=eps, sensitivity=1.0)
                pf = utility.permute_and_flip_expected_gap(scores, **kw)
                em = utility.exponential_expected_gap(scores, **kw)
                assert pf <= em * (1 + 1e-12), (n, eps, pf, em)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: utility.exponential_utility_bound(0.0, 1.0, 10, 1.0), "epsilon must be finite"),
        (lambda: utility.exponential_utility_bound(1.0, -1, 10, 1.0), "sensitivity must be"),
        (lambda: utility.exponential_utility_bound(1.0, 1.0, 0, 1.0), "num_outcomes must be"),
        (lambda: utility.exponential_utility_bound(1.0, 1.0, 5, 1.0, 6), "num_optimal must be <="),
        (lambda: utility.exponential_utility_bound(1.0, 1.0, 5, np.nan), "t must be finite"),
        (lambda: utility.laplace_tail_bound(1.0, 1.0, 0.0), "beta must be finite and > 0"),
        (lambda: utility.laplace_tail_bound(1.0, 1.0, 1.5), r"beta must be in \(0, 1\]"),
        (lambda: utility.laplace_tail_bound(1.0, 1.0, 0.1, 0), "num_queries must be"),
        (lambda: utility.exponential_probs([], epsilon=1.0, sensitivity=1.0), "non-empty 1-d"),
        (lambda: utility.exponential_probs([[1.0]], epsilon=1.0, sensitivity=1.0), "1-d"),
        (lambda: utility.permute_and_flip_probs([np.nan], epsilon=1.0, sensitivity=1.0), "NaN"),
        (lambda: utility.permute_and_flip_probs([-np.inf], epsilon=1.0, sensitivity=1.0), "-inf"),
        (lambda: utility.exponential_expected_gap([1.0], epsilon=np.inf, sensitivity=1.0), "eps"),
        (
            lambda: utility.report_noisy_max_expected_gap(
                [1.0, 2.0], epsilon=1.0, sensitivity=1.0, noise="cauchy"
            ),
            "noise must be one of",
        ),
        (
            lambda: utility.report_noisy_max_probs([1.0, 2.0], epsilon=np.ones(2), sensitivity=1.0),
            "scalars",
        ),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------- continuous laws

EDGES = np.array([-1.0, 0.0, 0.0, 0.5, 2.0, 2.0001, 3.0])
INTERCEPTS = np.array([0.5, 9.0, 1.0, 3.0, -np.inf, -2.0])
SLOPES = np.array([1.0, 0.0, 0.0, -1.5, 2.0, 40.0])  # zero width, flat, steep, excluded


def _quad(f, edges):
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b > a:
            total += scipy.integrate.quad(f, a, b, epsabs=0, epsrel=1e-12, limit=200)[0]
    return total


def _piecewise_utility(r, edges, intercepts, slopes):
    j = np.clip(np.searchsorted(edges, r, side="right") - 1, 0, len(slopes) - 1)
    while j > 0 and edges[j] == edges[j + 1]:  # zero-width intervals hold no point
        j -= 1
    return intercepts[j] + slopes[j] * r


@pytest.mark.parametrize(("eps", "sens", "mono"), [(1.0, 1.0, False), (3.0, 0.5, True)])
def test_piecewise_law_and_gap_match_quadrature(eps, sens, mono):
    k = eps / sens if mono else eps / (2 * sens)
    u = lambda r: _piecewise_utility(r, EDGES, INTERCEPTS, SLOPES)
    best = 9.0  # the flat interval is zero-width: the sup over positive widths is below
    best = max(
        max(c + m * a, c + m * b)
        for a, b, c, m in zip(EDGES[:-1], EDGES[1:], INTERCEPTS, SLOPES, strict=True)
        if b > a and c > -np.inf
    )
    dens = lambda r: math.exp(k * (u(r) - best)) if np.isfinite(u(r)) else 0.0
    z = _quad(dens, EDGES)
    law = utility.exponential_piecewise_law(
        EDGES, INTERCEPTS, SLOPES, epsilon=eps, sensitivity=sens, monotonic=mono
    )
    for j, (a, b) in enumerate(zip(EDGES[:-1], EDGES[1:], strict=True)):
        ref = _quad(dens, [a, b]) / z if b > a else 0.0
        assert law.probs[j] == pytest.approx(ref, rel=1e-9, abs=1e-15), j
    for x in (-1.0, -0.3, 0.0, 0.2, 1.7, 2.00005, 2.5, 3.0):
        ref = _quad(dens, [v for v in EDGES if v < x] + [x]) / z if x > EDGES[0] else 0.0
        assert law.cdf(x) == pytest.approx(ref, rel=1e-9, abs=1e-14), x
    mean = _quad(lambda r: r * dens(r), EDGES) / z
    assert law.mean() == pytest.approx(mean, rel=1e-9)
    gap = best - _quad(lambda r: u(r) * dens(r) if np.isfinite(u(r)) else 0.0, EDGES) / z
    got = utility.exponential_piecewise_expected_gap(
        EDGES, INTERCEPTS, SLOPES, epsilon=eps, sensitivity=sens, monotonic=mono
    )
    assert got == pytest.approx(gap, rel=1e-9)
    # and the comparison can fail: the gap of a 10% larger epsilon differs
    wrong = utility.exponential_piecewise_expected_gap(
        EDGES, INTERCEPTS, SLOPES, epsilon=1.1 * eps, sensitivity=sens, monotonic=mono
    )
    with pytest.raises(AssertionError):
        assert wrong == pytest.approx(gap, rel=1e-6)


BIDS = np.array([1.0, 1.0, 1.0, 3.01, 0.4, 2.2, 5.0])  # 5.0 lies above hi: clipped


def test_price_law_and_revenue_loss_match_quadrature():
    eps, lo, hi = 2.0, 0.0, 3.5
    b = np.clip(BIDS, lo, hi)
    rev = lambda p: p * np.count_nonzero(b >= p)
    grid = np.unique(np.concatenate([[lo, hi], b]))
    best = max(rev(v) for v in grid)
    dens = lambda p: math.exp(eps * (rev(p) - best) / (2 * hi))
    z = _quad(dens, grid)
    loss = best - _quad(lambda p: rev(p) * dens(p), grid) / z
    got = utility.private_price_expected_loss(BIDS, epsilon=eps, bounds=(lo, hi))
    assert got == pytest.approx(loss, rel=1e-9)
    law = utility.private_price_law(BIDS, epsilon=eps, bounds=(lo, hi))
    for x in (0.3, 1.0, 2.0, 3.2):
        ref = _quad(dens, [v for v in grid if v < x] + [x]) / z
        assert law.cdf(x) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(AssertionError):
        assert utility.private_price_expected_loss(
            BIDS, epsilon=1.1 * eps, bounds=(lo, hi)
        ) == pytest.approx(loss, rel=1e-6)


DATA = np.array([0.3, 1.2, 1.2, 2.5, 2.7, 3.9, 4.4, -7.0, 8.8])  # two clipped, a tie


@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 0.9, 1.0])
def test_quantile_errors_match_quadrature(q):
    eps, lo, hi = 1.3, 0.0, 5.0
    x = np.sort(np.clip(DATA, lo, hi))
    n = x.size
    count = lambda r: np.count_nonzero(x < r)
    sens = max(q, 1 - q)  # the design's add/remove sensitivity
    dens = lambda r: math.exp(-eps * abs(count(r) - q * n) / (2 * sens))
    edges = np.unique(np.concatenate([[lo, hi], x]))
    z = _quad(dens, edges)
    err = utility.private_quantile_error(DATA, q, epsilon=eps, bounds=(lo, hi))
    rank = _quad(lambda r: abs(count(r) - q * n) * dens(r), edges) / z
    assert err.rank_error == pytest.approx(rank, rel=1e-9)
    assert err.target == pytest.approx(np.quantile(x, q))
    val = _quad(lambda r: abs(r - err.target) * dens(r), np.union1d(edges, [err.target])) / z
    assert err.value_error == pytest.approx(val, rel=1e-9)
    sq = _quad(lambda r: (r - err.target) ** 2 * dens(r), edges) / z
    assert err.squared_value_error == pytest.approx(sq, rel=1e-9)
    # the rank-error law sums to 1 and its mean is the rank error
    assert err.rank_probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert float(np.dot(err.rank_values, err.rank_probs)) == pytest.approx(rank, rel=1e-9)
    # the old sensitivity 1 (not max(q, 1-q)) gives another law unless q is 0 or 1
    if 0 < q < 1:
        old = utility.private_quantile_error(DATA, q, epsilon=eps * sens, bounds=(lo, hi))
        with pytest.raises(AssertionError):
            assert old.rank_error == pytest.approx(rank, rel=1e-6)


def test_quantile_of_empty_data_is_uniform():
    err = utility.private_quantile_error([], 0.3, epsilon=1.0, bounds=(-1.0, 3.0), target=0.0)
    assert err.rank_error == 0.0 and err.value_error == pytest.approx((1 + 9) / 8)
    law = utility.private_quantile_law(np.zeros(0), 0.3, epsilon=1.0, bounds=(-1.0, 3.0))
    np.testing.assert_allclose(law.cdf([-2.0, -1.0, 0.0, 3.0]), [0.0, 0.0, 0.25, 1.0])


# ----------------------------------------------------------------------------- samplers vs laws


def test_samplers_follow_the_exact_continuous_laws():
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    eps = 1.0
    draws = jaxdp.exponential_piecewise(
        k1, EDGES, INTERCEPTS, SLOPES, epsilon=eps, sensitivity=1.0, shape=(200_000,)
    )
    law = utility.exponential_piecewise_law(EDGES, INTERCEPTS, SLOPES, epsilon=eps, sensitivity=1)
    assert utility.goodness_of_fit(draws, cdf=law.cdf).pvalue > 1e-3
    wrong = utility.exponential_piecewise_law(
        EDGES, INTERCEPTS, SLOPES, epsilon=0.8 * eps, sensitivity=1
    )
    assert utility.goodness_of_fit(draws, cdf=wrong.cdf).pvalue < 1e-3

    price = jaxdp.private_price
    rng = {"bounds": (0.0, 3.5)}
    if "bounds" not in inspect.signature(price).parameters:  # before the rename
        rng = {"price_range": (0.0, 3.5)}
    bids = np.clip(BIDS, 0.0, 3.5)
    draws = price(k2, bids, epsilon=2.0, shape=(200_000,), **rng)
    law = utility.private_price_law(bids, epsilon=2.0, bounds=(0.0, 3.5))
    assert utility.goodness_of_fit(draws, cdf=law.cdf).pvalue > 1e-3
    wrong = utility.private_price_law(bids, epsilon=1.6, bounds=(0.0, 3.5))
    assert utility.goodness_of_fit(draws, cdf=wrong.cdf).pvalue < 1e-3

    # q = 1: the sensitivity max(q, 1 - q) is 1 under both the old and new design
    draws = jaxdp.private_quantile(k3, DATA, 1.0, epsilon=1.3, bounds=(0.0, 5.0), shape=(200_000,))
    law = utility.private_quantile_law(DATA, 1.0, epsilon=1.3, bounds=(0.0, 5.0))
    assert utility.goodness_of_fit(draws, cdf=law.cdf).pvalue > 1e-3
    wrong = utility.private_quantile_law(DATA, 1.0, epsilon=1.1, bounds=(0.0, 5.0))
    assert utility.goodness_of_fit(draws, cdf=wrong.cdf).pvalue < 1e-3


def test_goodness_of_fit_discrete():
    probs = utility.exponential_probs(SCORES6, epsilon=1.0, sensitivity=1.0)
    draws = jaxdp.exponential(
        jax.random.key(1), SCORES6, epsilon=1.0, sensitivity=1.0, shape=(100_000,)
    )
    res = utility.goodness_of_fit(draws, probs=probs)
    assert res.test == "chi-square" and res.num_draws == 100_000 and res.pvalue > 1e-3
    wrong = utility.exponential_probs(SCORES6, epsilon=0.9, sensitivity=1.0)
    assert utility.goodness_of_fit(draws, probs=wrong).pvalue < 1e-3
    # an outcome of probability 0 that was drawn: rejected at once
    zero = np.append(probs[:-1], 0.0)
    zero[0] += probs[-1]
    assert utility.goodness_of_fit(draws, probs=zero).pvalue == 0.0
    # rare outcomes are pooled
    rare = utility.goodness_of_fit(np.zeros(100, int), probs=[0.999, 0.0005, 0.0005])
    assert rare.num_bins == 2 and rare.pvalue > 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(), "exactly one of probs"),
        (dict(probs=[0.5, 0.5], cdf=np.tanh), "exactly one of probs"),
        (dict(probs=[0.5, 0.6]), "sum to 1"),
        (dict(probs=[1.0]), r"lie in \[0, 1\)"),
        (dict(probs=[0.5, 0.5], min_expected=0), "min_expected must be > 0"),
        (dict(cdf="norm"), "cdf must be callable"),
    ],
)
def test_goodness_of_fit_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        utility.goodness_of_fit(np.array([0, 1, 1]), **kwargs)


def test_goodness_of_fit_without_scipy(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    with pytest.raises(ImportError, match="needs scipy"):
        utility.goodness_of_fit([0, 1], probs=[0.5, 0.5])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: utility.private_quantile_error([1.0], 1.5, epsilon=1, bounds=(0, 1)), "q must"),
        (lambda: utility.private_quantile_error([1.0], 0.5, epsilon=0, bounds=(0, 1)), "epsilon"),
        (lambda: utility.private_quantile_law([1.0], 0.5, epsilon=1, bounds=(1, 0)), "bounds"),
        (lambda: utility.private_quantile_law([np.nan], 0.5, epsilon=1, bounds=(0, 1)), "finite"),
        (lambda: utility.private_price_law([1.0], epsilon=1, bounds=(-1, 2)), "lo >= 0"),
        (
            lambda: utility.exponential_piecewise_law(
                [0.0, 1.0], [0.0], [0.0], epsilon=1, sensitivity=1, monotonic="no"
            ),
            "monotonic must be a bool",
        ),
        (
            lambda: utility.exponential_piecewise_law(
                [1.0, 0.0], [0.0], [0.0], epsilon=1, sensitivity=1
            ),
            "non-decreasing",
        ),
    ],
)
def test_continuous_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.slow
def test_quantile_rank_error_against_1e8_monte_carlo():
    from jaxdp import montecarlo

    data = jnp.asarray(DATA)
    x = np.sort(np.clip(DATA, 0.0, 5.0))

    def trial(key):
        r = jaxdp.private_quantile(key, data, 1.0, epsilon=1.3, bounds=(0.0, 5.0))
        below = jnp.sum(jnp.asarray(x) < r)
        return {"rank": jnp.abs(below - x.size).astype(jnp.float32)}

    out = montecarlo.run(trial, jax.random.key(0), 10**8, batch_size=2**20, level=0.999)
    exact = utility.private_quantile_error(DATA, 1.0, epsilon=1.3, bounds=(0.0, 5.0))
    assert out["rank"].ci_low <= exact.rank_error <= out["rank"].ci_high
