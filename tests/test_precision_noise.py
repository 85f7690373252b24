"""Finite precision of the noise-based selection paths (SECURITY.md, "noise-based paths").

Three kinds of checks, each shown to fail on a deliberately wrong law or on the
old float32 sampler (additive Gumbel/Laplace/exponential noise from 32-bit
uniforms):

* the two hypotheses of the race lemma, checked exactly on the implemented
  float32 code: the noise CDF (computed exactly by bisection over the 64-bit
  integers that feed it) is within ``exp(+-kappa)`` and ``2**-65`` of the real
  one, and the rates ``exp(-logit)`` are within ``exp(+-rho)`` of the real ones;
* the implemented law of a two-outcome race at huge logit gaps (30, 35, 40),
  where the old sampler has probability exactly 0, and its privacy ratio;
* law tests at n = 10**6 with scores in 10 equal groups (chi-square over the
  groups), for every public noise path.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

import jaxdp
from jaxdp import _noisy_kernels, _random, _top_k

U = 2.0**-24  # float32 unit roundoff
GAMMA = 2.0**-65  # absolute resolution of the 64-bit noise CDF
#: Relative accuracy of the implemented noise CDF, in units of U, with the
#: backend's log1p counted at 4 units (CUDA's bound; measured <= 1.2 on CPU).
KAPPA = {"gumbel": 7 * U, "exponential": 3 * U, "laplace": 4 * U}
#: Relative accuracy of the rates: exp at 4 units (CUDA's bound; CPU <= 1.4) + 1.25.
RHO = 5.25 * U


# ----------------------------------------------------------------------------- noise CDF


def _real_cdf(noise: str, x: np.ndarray) -> np.ndarray:
    """P[X <= x] of the race variable X (float64)."""
    if noise == "gumbel":  # Exp(1)
        return -np.expm1(-x)
    if noise == "exponential":  # U(0, 1)
        return np.minimum(x, 1.0)
    return np.where(x <= 1, x / 2, 1 - 0.5 / x)  # exp(-Laplace(1))


@functools.cache
def _pipeline(noise: str, old: bool):
    if old:  # the old generators: one 32-bit word, (k + 1/2) / 2**32

        def x_of(hi, lo):
            del lo
            u = _random._unit(hi, 32, np.dtype(np.float32))
            if noise == "gumbel":
                return -jnp.log1p(-u)
            return u

        return jax.jit(x_of)
    return jax.jit(functools.partial(_random.race_from_words, noise))


def _words(k: np.ndarray, top: int = 0) -> tuple[np.ndarray, np.ndarray]:
    hi = (k >> np.uint64(32)).astype(np.uint32) | np.uint32(top)
    return hi, (k & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _first_k(pred, shape, bits: int) -> np.ndarray:
    """Smallest k in [0, 2**bits - 1] with pred(k) False, for pred true then false
    in k (bisection; the last integer 2**bits - 1 counts as False: <= 2**-63 off)."""
    lo_k = np.zeros(shape, np.uint64)
    hi_excl = np.full(shape, np.uint64(2**bits - 1))
    for _ in range(bits + 1):
        mid = lo_k + (hi_excl - lo_k) // np.uint64(2)
        ok = pred(mid) & (lo_k < hi_excl)
        lo_k = np.where(ok, mid + np.uint64(1), lo_k)
        hi_excl = np.where(ok, hi_excl, mid)
    return lo_k.astype(np.float64)


def _count_le(noise: str, x: np.ndarray, bits: int, top: int = 0, old: bool = False):
    """#{k < 2**bits : X(k) <= x} for the non-decreasing map k -> X."""
    f = _pipeline(noise, old)
    if old:
        return _first_k(lambda k: np.asarray(f(k.astype(np.uint32), 0)) <= x, x.shape, bits)
    return _first_k(lambda k: np.asarray(f(*_words(k, top))) <= x, x.shape, bits)


def implemented_cdf(noise: str, x, old: bool = False) -> np.ndarray:
    """P[X <= x] of the implemented float32 race variable, exactly (up to float64
    rounding of the count / 2**64)."""
    x = np.atleast_1d(np.asarray(x, np.float32))
    if old:
        return _count_le(noise, x, 32, old=True) / 2.0**32
    if noise != "laplace":
        return _count_le(noise, x, 64) / 2.0**64
    f = _pipeline("laplace", False)
    pos = _count_le(noise, x, 63, top=1 << 31)  # sign set: X = U, increasing in k
    # sign clear: X = 1/U, decreasing in k: #{X <= x} = 2**63 - #{X > x}.
    neg = 2.0**63 - _first_k(lambda k: np.asarray(f(*_words(k))) > x, x.shape, 63)
    return (pos + neg) / 2.0**64


X_GRID = np.concatenate(
    [
        np.float32(2.0) ** -np.arange(1, 62, dtype=np.float32),
        np.float32([0.3, 0.7, 1.0, 1.5, 3, 8, 15]),
    ]
)


def assert_cdf_within(noise: str, x: np.ndarray, got: np.ndarray, kappa: float):
    real = _real_cdf(noise, x.astype(np.float64))
    assert np.all(got <= np.exp(kappa) * real + GAMMA), (x, got / real)
    assert np.all(got >= np.exp(-kappa) * real - GAMMA), (x, got / real)


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
def test_noise_cdf_is_resolved_to_2_to_the_minus_65(noise):
    got = implemented_cdf(noise, X_GRID)
    assert_cdf_within(noise, X_GRID, got, KAPPA[noise])
    # Down to x = 2**-61 the implemented CDF is positive: a Gumbel value of 42.
    assert np.all(got > 0)


@pytest.mark.parametrize("noise", ["gumbel", "exponential"])
def test_noise_cdf_check_catches_the_32_bit_generators(noise):
    got = implemented_cdf(noise, X_GRID, old=True)
    with pytest.raises(AssertionError):
        assert_cdf_within(noise, X_GRID, got, KAPPA[noise])


# ----------------------------------------------------------------------------- rates


def _adversarial_scores(rng, n=200_000):
    big = rng.choice([1.0, 1e3, 1e6, 1e12, 1e30], size=n)
    gaps = np.exp(rng.uniform(-30, 8, size=n)) * rng.choice([0.0, 1.0], size=n, p=[0.05, 0.95])
    top = (rng.standard_normal(n) * big).astype(np.float32)
    s = (top.astype(np.float64) - gaps).astype(np.float32)
    return top, np.minimum(s, top)


def _real_log_rate(top, s, c):
    """min(c (top - s), 80) in float64 (exact enough: 2**-53 relative)."""
    d = top.astype(np.float64) - s.astype(np.float64)
    return np.minimum(d * c.astype(np.float64), 80.0)


def assert_rates_within(log_rate, real, rho):
    err = np.abs(log_rate - real)
    assert err.max() <= rho, (err.max() / U, real[np.argmax(err)])


def test_rates_are_relative_to_a_few_roundings():
    rng = np.random.default_rng(0)
    top, s = _adversarial_scores(rng)
    c = np.exp(rng.uniform(-20, 12, size=top.shape)).astype(np.float32)
    # Compiled, as the race runs it: XLA's simplifier acts only inside jit.
    rate = jax.jit(_noisy_kernels.race_rates)(jnp.asarray(s), jnp.asarray(top), jnp.asarray(c))
    assert_rates_within(np.log(np.asarray(rate, np.float64)), _real_log_rate(top, s, c), RHO)
    # The naive float32 logits (s - max) * c then exp: errors grow with |logit|.
    naive_log = np.minimum(((top - s) * c).astype(np.float64), 80.0)  # float32 ops
    with pytest.raises(AssertionError):
        assert_rates_within(naive_log, _real_log_rate(top, s, c), RHO)


def _max_error_in_u(fn, exact, x):
    got = np.asarray(jax.jit(fn)(jnp.asarray(x))).astype(np.float64)
    want = exact(x.astype(np.float64))
    return np.max(np.abs(got / want - 1)) / U


def test_backend_log_and_log1p_within_assumed_error():
    """The noise paths' constants assume the backend's float32 log1p and log within
    2 ulp = 4u (CUDA's documented bounds; c_log1p in SECURITY.md), on the arguments
    the generators give them: log1p on (-1, 0) (Exp(1) = -log1p(-U)) and log on
    (2**-65, 48] (Gumbel = -log(Exp(1))). Measured on the backend the tests run on:
    2.86u and 2.00u on XLA:CPU (jax 0.10.2)."""
    e = -np.concatenate([np.geomspace(2.0**-64, 0.5, 1_000_001), 1 - np.geomspace(U, 0.5, 10**6)])
    assert _max_error_in_u(jnp.log1p, np.log1p, e.astype(np.float32)) <= 4.0
    x = np.geomspace(2.0**-65, 48.0, 2_000_003).astype(np.float32)
    assert _max_error_in_u(jnp.log, np.log, x[x != 1]) <= 4.0


U64 = 2.0**-53


def test_float64_rounds_within_their_constants():
    """The float64 race (top_k past FLOAT32_ROUNDS, and everything under x64) takes
    c_exp, c_log <= 4 and c_log1p <= 256 units of 2**-53 (XLA:CPU's float64 log1p
    is off by up to 240 units on (-0.5, -0.1)), and rates within (c_exp + 1.25)
    units: checked against long double on the backend the tests run on."""
    assert np.finfo(np.longdouble).nmant >= 63, "needs an 80-bit long double"
    wide = np.longdouble
    rng = np.random.default_rng(1)
    top, s = _adversarial_scores(rng)
    c = np.exp(rng.uniform(-20, 12, size=top.shape)).astype(np.float32)
    with jax.enable_x64(True):
        args = [jnp.asarray(a, jnp.float64) for a in (s, top, c)]
        rate = np.asarray(jax.jit(_noisy_kernels.race_rates)(*args))
        e = -np.concatenate(
            [np.geomspace(2.0**-64, 0.5, 1_000_001), 1 - np.geomspace(U64, 0.5, 10**6)]
        )
        x = np.geomspace(2.0**-65, 48.0, 2_000_003)
        t = np.linspace(0.0, 80.0, 2_000_003)
        got = {
            f.__name__: np.asarray(jax.jit(f)(jnp.asarray(a)))
            for f, a in [(jnp.log1p, e), (jnp.log, x[x != 1]), (jnp.exp, t)]
        }
    real = np.minimum((top.astype(wide) - s.astype(wide)) * c.astype(wide), wide(80))
    assert np.max(np.abs(np.log(rate.astype(wide)) - real)) <= (4 + 1.25) * U64

    def units(name, fn, a):
        return float(np.max(np.abs(got[name].astype(wide) / fn(a.astype(wide)) - 1)) / U64)

    assert units("log1p", np.log1p, e) <= 256
    assert units("log", np.log, x[x != 1]) <= 4
    assert units("exp", np.exp, t) <= 4
    # the bound is per dtype in top_k's guarantee: 543 = 4 (4 + 1.25) + 4 + 2 (3 + 256)
    assert _top_k.ROUND_EXCESS[np.dtype(np.float64)] == (4 * 5.25 + 4 + 2 * 259) * U64


def test_scale_is_rounded_down():
    for eps in [0.1, 1 / 3, 1.0, 2.7, 1e-5, 123.4]:
        for delta in [1.0, 0.3, 7.0]:
            c = float(_noisy_kernels.round_down_scale(jnp.float32(eps) / (2 * jnp.float32(delta))))
            assert c <= eps / (2 * delta)
            assert c >= eps / (2 * delta) * (1 - 2**-20)


# ----------------------------------------------------------------------------- two outcomes


def two_outcome_prob(gap: float, old: bool = False) -> float:
    """P[outcome 1 wins] for logits (0, -gap) under the implemented race, computed from
    the exact implemented noise CDF of outcome 1 against the (smooth) Exp(1) of the
    leader by 64-point Gauss-Laguerre. ``old``: additive Gumbel, 32-bit words."""
    nodes, weights = scipy.special.roots_laguerre(64)
    if old:
        # i wins iff E_1 < E_0 e**-gap (exact in reals), E_1 on the 32-bit grid.
        x = (nodes * np.exp(-gap)).astype(np.float32)
        return float(np.sum(weights * implemented_cdf("gumbel", x, old=True)))
    rate = float(
        _noisy_kernels.race_rates(jnp.float32([-gap]), jnp.float32([0.0]), jnp.float32(1.0))[0]
    )
    # E_1 * rate < q  <=>  fl(E_1 * rate) < q; count with the product included.
    f = jax.jit(lambda hi, lo: _random.race_from_words("gumbel", hi, lo) * jnp.float32(rate))
    q = nodes.astype(np.float32)
    count = _first_k(lambda k: np.asarray(f(*_words(k))) < q, q.shape, 64)
    return float(np.sum(weights * count / 2.0**64))


def _exact_two(gap):
    return 1.0 / (1.0 + np.exp(gap))  # race_rates is called with scale 1 directly


@pytest.mark.parametrize("gap, rtol", [(26.0, 1e-5), (30.0, 1e-5), (35.0, 1e-4), (40.0, 1e-2)])
def test_huge_gap_outcome_has_its_probability(gap, rtol):
    # The old sampler could not draw these at all (Gumbel noise capped at 22.9).
    got = two_outcome_prob(gap)
    np.testing.assert_allclose(got, _exact_two(gap), rtol=rtol)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(two_outcome_prob(gap, old=True), _exact_two(gap), rtol=rtol)


def test_two_outcome_privacy_ratio():
    # Neighbours move the two logits by +-1 each (eps = 2, Delta = 1, c = 1): the
    # gap moves by 2 = eps. The implemented log-ratio stays below eps + 1e-5.
    eps = 2.0
    for gap in [0.5, 5.0, 20.0, 28.0, 33.0]:
        p, p_n = two_outcome_prob(gap), two_outcome_prob(gap + eps)
        q, q_n = 1 - p, 1 - p_n
        assert np.log(p / p_n) <= eps + 1e-5 and np.log(q_n / q) <= eps + 1e-5
    # The old sampler: probability 0 on one side, positive on the other.
    p, p_n = two_outcome_prob(24.0, old=True), two_outcome_prob(24.0 + eps, old=True)
    with np.errstate(divide="ignore"):
        with pytest.raises(AssertionError):
            assert np.log(p / p_n) <= eps + 1e-5


# ----------------------------------------------------------------------------- big-n laws

N = 10**6
GROUPS = 10
SIZES = np.full(GROUPS, N // GROUPS)
LOGITS = -np.arange(GROUPS) / 2.0  # eps = 2, Delta = 1: c = 1, score -g/2 for group g


def group_scores():
    return jnp.repeat(jnp.asarray(LOGITS, jnp.float32), N // GROUPS)


def group_law(noise: str, logits=LOGITS, sizes=SIZES) -> np.ndarray:
    """P[winner in group g] for argmax(logit + noise), in float64."""
    if noise == "gumbel":
        w = sizes * np.exp(logits - logits.max())
        return w / w.sum()
    # P[a given member of g wins] = int f(y - l_g) F(y - l_g)**(n_g - 1) prod_h F(y - l_h)**n_h dy.
    y = np.linspace(logits.min() - 60, logits.max() + 60, 1_200_001)
    z = y[None, :] - logits[:, None]
    if noise == "exponential":
        log_cdf = np.where(z > 0, np.log(-np.expm1(-np.maximum(z, 1e-300))), -np.inf)
        log_pdf = np.where(z >= 0, -z, -np.inf)
    else:
        log_cdf = np.where(z >= 0, np.log1p(-0.5 * np.exp(-np.abs(z))), z - np.log(2))
        log_pdf = -np.abs(z) - np.log(2)
    total = np.sum(sizes[:, None] * log_cdf, axis=0)
    with np.errstate(invalid="ignore"):
        log_dens = np.where(np.isfinite(log_pdf), log_pdf - log_cdf, -np.inf) + total[None, :]
    dens = np.exp(np.nan_to_num(log_dens, nan=-np.inf))
    probs = sizes * np.trapezoid(dens, y, axis=1)
    assert abs(probs.sum() - 1) < 1e-6
    return probs / probs.sum()


def assert_matches_law(groups, probs, alpha=1e-3):
    counts = np.bincount(np.asarray(groups).ravel(), minlength=len(probs))
    pvalue = scipy.stats.chisquare(counts, probs * counts.sum()).pvalue
    assert pvalue > alpha, (pvalue, counts, probs * counts.sum())


def _wrong(noise):
    return group_law(noise, logits=LOGITS * 0.6)


DRAWS = 256
KW = dict(epsilon=2.0, sensitivity=1.0, shape=(DRAWS,))


@pytest.mark.parametrize(
    "name, noise, sample",
    [
        (
            "exponential_gumbel",
            "gumbel",
            lambda k, s: jaxdp.exponential(k, s, method="gumbel", **KW),
        ),
        (
            "rnm_laplace",
            "laplace",
            lambda k, s: jaxdp.report_noisy_max(k, s, noise="laplace", **KW),
        ),
        ("permute_and_flip", "exponential", lambda k, s: jaxdp.permute_and_flip(k, s, **KW)),
    ],
)
def test_law_at_a_million_outcomes(name, noise, sample):
    draws = np.asarray(sample(jax.random.key(11), group_scores()))
    groups = draws // (N // GROUPS)
    assert_matches_law(groups, group_law(noise))
    with pytest.raises(AssertionError):
        assert_matches_law(groups, _wrong(noise))


def test_top_k_law_at_a_million_outcomes():
    # k = 2 at total eps = 4: each round is the exponential mechanism at c = 1.
    draws = np.asarray(
        jaxdp.top_k(
            jax.random.key(12), group_scores(), 2, epsilon=4.0, sensitivity=1.0, shape=(DRAWS,)
        )
    )
    groups = draws // (N // GROUPS)
    first = group_law("gumbel")
    second = np.zeros(GROUPS)
    for g in range(GROUPS):  # peeling: the second round without one member of g
        sizes = SIZES - (np.arange(GROUPS) == g)
        second += first[g] * group_law("gumbel", sizes=sizes)
    assert_matches_law(groups[:, 0], first, alpha=5e-4)
    assert_matches_law(groups[:, 1], second, alpha=5e-4)
    with pytest.raises(AssertionError):
        assert_matches_law(groups[:, 0], _wrong("gumbel"))


def _grouped_score(i):
    return -(i // (N // GROUPS)).astype(jnp.float32) / 2


def test_streaming_law_at_a_million_outcomes():
    draws = np.asarray(
        jaxdp.exponential_streaming(
            jax.random.key(13), _grouped_score, N, chunk_size=2**16, method="inverse_cdf", **KW
        )
    )
    groups = draws // (N // GROUPS)
    assert_matches_law(groups, group_law("gumbel"))
    with pytest.raises(AssertionError):
        assert_matches_law(groups, _wrong("gumbel"))


# ----------------------------------------------------------------------------- slow audit


@pytest.mark.slow
@pytest.mark.parametrize(
    "noise, law",
    [
        ("gumbel", lambda g: 1 / (1 + np.exp(g))),
        ("exponential", lambda g: np.exp(-g) / 2),  # P[Exp_2 - Exp_1 > g]
        ("laplace", lambda g: np.exp(-g) * (2 + g) / 4),  # P[L_2 - L_1 > g]
    ],
)
def test_rare_outcome_audit_1e8(noise, law):
    """10**8 draws of two outcomes at logit gap 14: the rare one has probability
    ~1e-6 (about 100 hits); a z-test against the exact law."""
    gap = 14.0
    scores = jnp.float32([0.0, -gap])
    p = law(gap * (1 - 2.0**-21))  # the rounded-down scale (c = 1 here)
    run = jax.jit(
        lambda k: jnp.sum(
            jaxdp.report_noisy_max(
                k, scores, epsilon=2.0, sensitivity=1.0, noise=noise, shape=(10**6,)
            )
        )
    )
    hits = sum(int(run(jax.random.fold_in(jax.random.key(21), i))) for i in range(100))
    total = 10**8

    def check(p):
        z = (hits - total * p) / np.sqrt(total * p * (1 - p))
        assert abs(z) < 5, (hits, total * p)

    check(p)
    with pytest.raises(AssertionError):  # the law at a gap 10 % larger
        check(law(1.1 * gap))
