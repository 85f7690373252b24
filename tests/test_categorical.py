"""Randomized response and the private mode against their exact laws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, exponential_law, randomized_response_law

import jaxdp


@pytest.mark.parametrize("k,eps", [(2, 1.0), (4, 0.5), (7, 3.0)])
def test_randomized_response_law(k, eps):
    values = jnp.arange(k)
    out = jaxdp.randomized_response(
        jax.random.key(0), values, epsilon=eps, num_categories=k, shape=(400_000, k)
    )
    assert out.shape == (400_000, k) and out.dtype == jnp.int32
    for v in range(k):
        assert_matches_law(out[:, v], randomized_response_law(v, eps, k))
    with pytest.raises(AssertionError):
        assert_matches_law(out[:, 0], randomized_response_law(0, 1.1 * eps, k))


def test_randomized_response_extreme_epsilon():
    v = jnp.array([0, 1, 2])
    out = jaxdp.randomized_response(
        jax.random.key(1), v, epsilon=1e6, num_categories=3, shape=(1000, 3)
    )
    np.testing.assert_array_equal(out, np.broadcast_to(v, (1000, 3)))
    out = jaxdp.randomized_response(
        jax.random.key(1), v, epsilon=1e-6, num_categories=3, shape=(300_000, 3)
    )
    assert_matches_law(out[:, 0], np.full(3, 1 / 3))


def test_private_mode_law():
    values = np.repeat(np.arange(4), [30, 32, 5, 31])
    out = jaxdp.private_mode(
        jax.random.key(2), values, epsilon=0.2, num_categories=5, shape=(10**6,)
    )
    counts = np.bincount(values, minlength=5)
    assert_matches_law(out, exponential_law(counts, 0.2, 1.0, monotonic=True))
    with pytest.raises(AssertionError):  # the non-monotonic factor would be caught
        assert_matches_law(out, exponential_law(counts, 0.2, 1.0, monotonic=False))


def test_private_mode_batched_datasets():
    values = jnp.array([[0, 0, 1, 2], [2, 2, 2, 1]])
    out = jaxdp.private_mode(jax.random.key(3), values, epsilon=50.0, num_categories=3)
    assert out.shape == (2,)
    np.testing.assert_array_equal(out, [0, 2])
