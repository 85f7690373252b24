"""Tests of jaxdp.utility: utility bounds and exact laws / expected gaps."""

from __future__ import annotations

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
