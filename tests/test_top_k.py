"""One-shot Gumbel top-k against the exact law of k peeling rounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, top_k_law

import jaxdp

SCORES = np.array([0.0, 2.0, 1.0, 3.0, 2.5])
EPS, DELTA, K = 2.0, 1.0, 2


def _tuple_ids(draws, tuples, n):
    code = {t[0] * n + t[1]: i for i, t in enumerate(tuples)}
    flat = np.asarray(draws[:, 0]) * n + np.asarray(draws[:, 1])
    return np.vectorize(code.__getitem__)(flat)


@pytest.mark.parametrize("monotonic", [False, True])
def test_law_of_ordered_tuples(monotonic):
    draws = jaxdp.top_k(
        jax.random.key(0),
        SCORES,
        K,
        epsilon=EPS,
        sensitivity=DELTA,
        monotonic=monotonic,
        shape=(10**6,),
    )
    assert draws.shape == (10**6, K) and draws.dtype == jnp.int32
    d = np.asarray(draws)
    assert np.all(d[:, 0] != d[:, 1])
    tuples, probs = top_k_law(SCORES, K, EPS, DELTA, monotonic)
    ids = _tuple_ids(d, tuples, len(SCORES))
    assert_matches_law(ids, probs)
    with pytest.raises(AssertionError):  # epsilon not divided by k is caught
        _, wrong = top_k_law(SCORES, K, K * EPS, DELTA, monotonic)
        assert_matches_law(ids, wrong)
    with pytest.raises(AssertionError):
        _, wrong = top_k_law(SCORES, K, EPS, DELTA, not monotonic)
        assert_matches_law(ids, wrong)


def test_shapes_and_batch():
    scores = jnp.arange(24.0).reshape(2, 3, 4)
    out = jaxdp.top_k(jax.random.key(1), scores, 3, epsilon=1.0, sensitivity=1.0)
    assert out.shape == (2, 3, 3)
    out = jaxdp.top_k(jax.random.key(1), scores, 2, epsilon=1.0, sensitivity=1.0, shape=(5, 2, 3))
    assert out.shape == (5, 2, 3, 2)
    out = jaxdp.top_k(jax.random.key(1), scores, 2, epsilon=1.0, sensitivity=1.0, axis=1)
    assert out.shape == (2, 4, 2)
    # k = n returns a permutation
    perm = jaxdp.top_k(jax.random.key(2), jnp.zeros(6), 6, epsilon=1.0, sensitivity=1.0)
    assert sorted(np.asarray(perm).tolist()) == list(range(6))


def test_high_epsilon_returns_true_top_k_in_order():
    scores = jnp.array([0.0, 5.0, 3.0, 9.0, 1.0])
    out = jaxdp.top_k(jax.random.key(3), scores, 3, epsilon=1e6, sensitivity=1.0, shape=(100,))
    np.testing.assert_array_equal(np.asarray(out), np.tile([3, 1, 2], (100, 1)))


def test_neg_inf_never_selected():
    scores = jnp.array([0.0, -jnp.inf, 1.0, -jnp.inf, 0.5])
    out = np.asarray(
        jaxdp.top_k(jax.random.key(4), scores, 3, epsilon=1e-3, sensitivity=1.0, shape=(10_000,))
    )
    assert not np.isin(out, [1, 3]).any()
