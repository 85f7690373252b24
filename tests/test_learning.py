"""select_hypothesis against the exact law of the exponential mechanism."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, exponential_law

import jaxdp


def test_select_hypothesis_law():
    rng = np.random.default_rng(0)
    n, num_h = 50, 6
    labels = rng.integers(0, 2, size=n)
    flip = rng.random((num_h, n)) < np.linspace(0.05, 0.5, num_h)[:, None]
    predictions = np.where(flip, 1 - labels, labels)
    out = jaxdp.select_hypothesis(
        jax.random.key(0), predictions, labels, epsilon=0.3, shape=(10**6,)
    )
    errors = (predictions != labels).sum(-1)
    # score -errors/n with sensitivity 1/n, textbook factor eps / (2 Δ)
    assert_matches_law(out, exponential_law(-errors / n, 0.3, 1 / n))
    with pytest.raises(AssertionError):
        assert_matches_law(out, exponential_law(-errors / n, 0.3, 1 / n, monotonic=True))


def test_select_hypothesis_batch_and_broadcast():
    preds = jnp.array([[[0, 1, 1, 0], [1, 1, 1, 1]], [[1, 1, 1, 1], [0, 0, 0, 0]]])
    labels = jnp.array([1, 1, 1, 1])
    out = jaxdp.select_hypothesis(jax.random.key(1), preds, labels, epsilon=100.0)
    assert out.shape == (2,)
    np.testing.assert_array_equal(out, [1, 0])
