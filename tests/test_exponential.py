"""The exponential mechanism against its exact float64 law."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, exponential_law

import jaxdp

N_DRAWS = 10**6
SCORES = np.array([0.0, 1.0, 2.5, 3.0, 3.0, -2.0, -np.inf, 1.5])
EPS, DELTA = 1.3, 0.7


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf", "auto"])
@pytest.mark.parametrize("monotonic", [False, True])
def test_law(method, monotonic):
    draws = jaxdp.exponential(
        jax.random.key(0),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        monotonic=monotonic,
        shape=(N_DRAWS,),
        method=method,
    )
    assert draws.shape == (N_DRAWS,) and draws.dtype == jnp.int32
    assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, monotonic))
    # The check can fail: the same draws against the other factor, and a slightly wrong epsilon.
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, not monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exponential_law(SCORES, 0.95 * EPS, DELTA, monotonic))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_law_batched_rows(method):
    """Scores (B, n) with shape (S, B): S draws for each row, each row its own law."""
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(3, 20)) * 2
    scores[1, 5] = -np.inf
    eps = np.array([0.5, 1.0, 4.0])  # one epsilon per row
    draws = jaxdp.exponential(
        jax.random.key(1),
        scores,
        epsilon=eps,
        sensitivity=1.0,
        shape=(300_000, 3),
        method=method,
    )
    assert draws.shape == (300_000, 3)
    for b in range(3):
        assert_matches_law(draws[:, b], exponential_law(scores[b], eps[b], 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws[:, 0], exponential_law(scores[0], eps[1], 1.0))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_exact_ties_are_uniform(method):
    scores = np.array([5.0, 5.0, 5.0, 5.0, 0.0])
    draws = jaxdp.exponential(
        jax.random.key(2), scores, epsilon=100.0, sensitivity=1.0, shape=(N_DRAWS,), method=method
    )
    probs = exponential_law(scores, 100.0, 1.0)
    assert_matches_law(draws, probs)
    with pytest.raises(AssertionError):  # lowest-index tie-breaking would be caught
        assert_matches_law(draws, np.array([0.4, 0.2, 0.2, 0.2, 0.0]))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_neg_inf_never_selected(method):
    scores = np.array([-np.inf, 0.0, -np.inf, -1e30, -np.inf])
    draws = jaxdp.exponential(
        jax.random.key(3), scores, epsilon=1e-6, sensitivity=1.0, shape=(200_000,), method=method
    )
    d = np.asarray(draws)
    assert set(np.unique(d)) <= {1, 3}
    # eps * 1e30 / 2 ~ 5e23: outcome 3 has probability exp(-5e23) == 0
    assert np.all(d == 1)


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
@pytest.mark.parametrize("epsilon", [1e-6, 1.0, 1e6])
@pytest.mark.parametrize("magnitude", [1.0, 1e30])
def test_no_nan_extreme_values(method, epsilon, magnitude):
    rng = np.random.default_rng(4)
    scores = rng.normal(size=(4, 50)) * magnitude
    draws = jaxdp.exponential(
        jax.random.key(4), scores, epsilon=epsilon, sensitivity=1.0, shape=(1000, 4), method=method
    )
    d = np.asarray(draws)
    assert d.min() >= 0 and d.max() < 50
    lp = jaxdp.exponential_log_probs(scores, epsilon=epsilon, sensitivity=1.0)
    assert not np.any(np.isnan(lp))
    np.testing.assert_allclose(np.exp(lp).sum(-1), 1.0, rtol=1e-5)
    if epsilon * magnitude >= 1e6:  # the argmax wins with probability 1 - exp(-huge)
        np.testing.assert_array_equal(d, np.broadcast_to(scores.argmax(-1), d.shape))


def test_large_offset_does_not_move_the_law():
    """Scores 2**23 + small differences (exact in float32; 2**40 + ... in float64):
    shifting by the row maximum keeps the law, where exp(eps * s / 2) would overflow."""
    base = np.array([0.0, 1.0, 2.0, 3.0])
    lp = jaxdp.exponential_log_probs(base + 2.0**23, epsilon=1.0, sensitivity=1.0)
    np.testing.assert_allclose(np.exp(lp), exponential_law(base, 1.0, 1.0), rtol=1e-6)
    draws = jaxdp.exponential(
        jax.random.key(7), base + 2.0**23, epsilon=1.0, sensitivity=1.0, shape=(N_DRAWS,)
    )
    assert_matches_law(draws, exponential_law(base, 1.0, 1.0))
    with jax.enable_x64():
        lp = jaxdp.exponential_log_probs(base + 2.0**40, epsilon=1.0, sensitivity=1.0)
        np.testing.assert_allclose(np.exp(lp), exponential_law(base, 1.0, 1.0), rtol=1e-12)


def test_log_probs_exact():
    lp = jaxdp.exponential_log_probs(SCORES, epsilon=EPS, sensitivity=DELTA)
    expected = exponential_law(SCORES, EPS, DELTA)
    np.testing.assert_allclose(np.exp(np.asarray(lp)), expected, rtol=1e-5, atol=1e-12)
    assert lp[6] == -np.inf
    lp_m = jaxdp.exponential_log_probs(SCORES, epsilon=EPS, sensitivity=DELTA, monotonic=True)
    np.testing.assert_allclose(np.exp(lp_m), exponential_law(SCORES, EPS, DELTA, True), rtol=1e-5)


def test_log_probs_axis():
    scores = np.random.default_rng(5).normal(size=(3, 6, 2))
    lp = jaxdp.exponential_log_probs(scores, epsilon=1.0, sensitivity=1.0, axis=1)
    assert lp.shape == scores.shape
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, rtol=1e-5)


def test_log_probs_float64():
    with jax.enable_x64():
        lp = jaxdp.exponential_log_probs(np.array([0.0, 30.0]), epsilon=2.0, sensitivity=1.0)
        assert lp.dtype == jnp.float64
        # P[0] = 1 / (1 + e^30): resolved in float64
        np.testing.assert_allclose(float(lp[0]), -30 - np.log1p(np.exp(-30.0)), rtol=1e-14)


def test_privacy_log_ratio_bounded():
    """For neighbouring score vectors (every score moved by at most Δ), the
    log-probability ratio is at most ε; for monotonic moves, too, with ε/Δ."""
    rng = np.random.default_rng(6)
    eps, delta = 0.8, 2.0
    with jax.enable_x64():
        for _ in range(50):
            s = rng.normal(size=12) * 5
            moves = [
                rng.uniform(-delta, delta, size=12),
                np.where(np.arange(12) == rng.integers(12), delta, -delta),  # worst case
            ]
            for move in moves:
                lp = np.asarray(jaxdp.exponential_log_probs(s, epsilon=eps, sensitivity=delta))
                lq = np.asarray(
                    jaxdp.exponential_log_probs(s + move, epsilon=eps, sensitivity=delta)
                )
                assert np.max(np.abs(lp - lq)) <= eps * (1 + 1e-12)
            mono = rng.uniform(0, delta, size=12)  # all up: a monotonic neighbour
            lp = np.asarray(
                jaxdp.exponential_log_probs(s, epsilon=eps, sensitivity=delta, monotonic=True)
            )
            lq = np.asarray(
                jaxdp.exponential_log_probs(
                    s + mono, epsilon=eps, sensitivity=delta, monotonic=True
                )
            )
            assert np.max(np.abs(lp - lq)) <= eps * (1 + 1e-12)
        # The worst case is attained: the bound is tight, so the check can fail.
        s = np.zeros(1000)
        move = np.where(np.arange(1000) == 0, delta, -delta)
        lp = np.asarray(jaxdp.exponential_log_probs(s, epsilon=eps, sensitivity=delta))
        lq = np.asarray(jaxdp.exponential_log_probs(s + move, epsilon=eps, sensitivity=delta))
        assert np.max(np.abs(lp - lq)) > 0.99 * eps


def test_auto_picks_a_method():
    from jaxdp import _kernels

    assert _kernels.choose_method(10**6, 1000, 1) in ("gumbel", "inverse_cdf")
    assert _kernels.choose_method(10**6, 1000, 1) == "inverse_cdf"
