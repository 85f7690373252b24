"""Exact laws of the mechanisms, computed independently of jaxdp in float64,
and the goodness-of-fit checks the statistical tests use."""

from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.integrate
import scipy.optimize
import scipy.special
import scipy.stats

ALPHA = 1e-3


def assert_matches_law(draws, probs, alpha: float = ALPHA) -> None:
    """Chi-square goodness of fit of integer ``draws`` against ``probs``.

    Outcomes of probability 0 must never be drawn; cells whose expected count
    is below 5 are pooled, as the chi-square approximation needs.
    """
    probs = np.asarray(probs, np.float64)
    draws = np.asarray(draws).ravel()
    assert draws.min() >= 0 and draws.max() < len(probs), (draws.min(), draws.max())
    counts = np.bincount(draws, minlength=len(probs)).astype(np.float64)
    possible = probs > 0
    assert counts[~possible].sum() == 0, "drew an outcome of probability 0"
    expected = probs[possible] / probs[possible].sum() * counts.sum()
    observed = counts[possible]
    small = expected < 5
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    if len(expected) < 2:
        return
    pvalue = scipy.stats.chisquare(observed, expected).pvalue
    assert pvalue > alpha, (pvalue, expected, observed)


def assert_matches_cdf(samples, cdf, alpha: float = ALPHA) -> None:
    """One-sample Kolmogorov-Smirnov test against an exact CDF."""
    samples = np.asarray(samples, np.float64).ravel()
    pvalue = scipy.stats.kstest(samples, cdf).pvalue
    assert pvalue > alpha, pvalue


# ----------------------------------------------------------------------------- laws


def exponential_law(scores, epsilon, sensitivity, monotonic=False):
    """P[r] ∝ exp(eps s_r / (2 Δ)) (eps s_r / Δ if monotonic), float64."""
    s = np.asarray(scores, np.float64)
    factor = epsilon / (sensitivity if monotonic else 2 * sensitivity)
    with np.errstate(invalid="ignore"):
        logits = np.where(np.isneginf(s), -np.inf, factor * (s - s[np.isfinite(s)].max()))
    return np.exp(logits - scipy.special.logsumexp(logits))


def permute_and_flip_law(scores, epsilon, sensitivity, monotonic=False):
    """McKenna & Sheldon's permute-and-flip, by enumerating every permutation."""
    s = np.asarray(scores, np.float64)
    factor = epsilon / (sensitivity if monotonic else 2 * sensitivity)
    accept = np.exp(factor * (s - s.max()))
    n = len(s)
    probs = np.zeros(n)
    perms = list(itertools.permutations(range(n)))
    for perm in perms:
        survive = 1.0
        for r in perm:
            probs[r] += survive * accept[r]
            survive *= 1 - accept[r]
    return probs / len(perms)


def laplace_noisy_max_law(scores, epsilon, sensitivity, monotonic=False):
    """P[argmax_r s_r + Lap(b)], b = 2Δ/ε (Δ/ε if monotonic), by quadrature."""
    s = np.asarray(scores, np.float64)
    b = (sensitivity if monotonic else 2 * sensitivity) / epsilon
    dist = scipy.stats.laplace(scale=b)
    probs = []
    lo, hi = s.min() - 40 * b, s.max() + 40 * b
    for r in range(len(s)):
        others = np.delete(s, r)

        def density(x, r=r, others=others):
            return dist.pdf(x - s[r]) * np.prod(dist.cdf(x - others))

        points = sorted(set(s.tolist()))
        value, _ = scipy.integrate.quad(density, lo, hi, points=points, limit=500, epsabs=1e-13)
        probs.append(value)
    probs = np.asarray(probs)
    return probs / probs.sum()


def top_k_law(scores, k, epsilon, sensitivity, monotonic=False):
    """Law of ordered k-tuples under peeling k rounds of the exponential mechanism
    at eps / k. Returns (tuples, probs)."""
    s = np.asarray(scores, np.float64)
    factor = (epsilon / k) / (sensitivity if monotonic else 2 * sensitivity)
    w = np.exp(factor * (s - s.max()))
    tuples = list(itertools.permutations(range(len(s)), k))
    probs = []
    for t in tuples:
        p, left = 1.0, w.sum()
        for r in t:
            p *= w[r] / left
            left -= w[r]
        probs.append(p)
    return tuples, np.asarray(probs)


def randomized_response_law(value, epsilon, k):
    keep = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    probs = np.full(k, (1 - keep) / (k - 1))
    probs[value] = keep
    return probs


def analytic_gaussian_sigma(epsilon, delta, sensitivity):
    """Balle & Wang 2018, Thm 8, solved with scipy's brentq in float64."""

    def excess(sigma):
        a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
        b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
        return scipy.stats.norm.cdf(a) - math.exp(epsilon) * scipy.stats.norm.cdf(b) - delta

    return scipy.optimize.brentq(excess, 1e-6 * sensitivity, 1e6 * sensitivity, xtol=1e-14)
