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


def test_randomized_response_keep_probability_rounds_down_exactly():
    from jaxdp._categorical import keep_threshold

    eps = np.concatenate([np.geomspace(1e-6, 30.0, 200), [1.0, np.log(3.0)]])
    for k in (2, 3, 10, 1000, 2**20):
        t = np.asarray(keep_threshold(jnp.asarray(eps, jnp.float32), k), np.float64)
        keep = t / 2.0**32  # the implemented P[keep], exactly
        e32 = np.asarray(np.float32(eps), np.float64)  # the epsilon the mechanism sees
        exact = 1.0 / (1.0 + (k - 1) * np.exp(-e32))
        assert np.all(keep <= exact), k
        # ratio P[keep] / P[one other] <= e^eps; and the law is not distorted
        ratio = keep * (k - 1) / (1 - keep)
        assert np.all(np.log(ratio) <= e32 + 1e-12)
        assert np.all(keep >= exact * (1 - 1e-6) - 2.0**-32)


def test_private_mode_traced_out_of_range_gives_minus_one_and_report():
    from jax.experimental import checkify

    def mode(v):
        return jaxdp.private_mode(jax.random.key(4), v, epsilon=1.0, num_categories=3)

    checked = checkify.checkify(jax.jit(mode), errors=checkify.user_checks)
    err, out = checked(jnp.array([[0, 1, 1], [0, 5, 1], [-1, 0, 0]]))
    assert "num_categories=3" in str(err.get())
    assert out[1] == -1 and out[2] == -1 and out[0] in (0, 1, 2)
    err, out = checked(jnp.array([[0, 1, 1]]))
    assert err.get() is None and out[0] >= 0
    np.testing.assert_array_equal(jax.jit(mode)(jnp.array([[0, 3, 1]])), [-1])


def test_empty_batches_give_empty_results():
    out = jaxdp.private_mode(
        jax.random.key(5), jnp.zeros((0, 4), jnp.int32), epsilon=1.0, num_categories=3
    )
    assert out.shape == (0,) and out.dtype == jnp.int32
    out = jaxdp.select_hypothesis(
        jax.random.key(5), jnp.zeros((0, 3, 4)), jnp.zeros(4), epsilon=1.0
    )
    assert out.shape == (0,) and out.dtype == jnp.int32
    out = jaxdp.private_mode(
        jax.random.key(5), jnp.array([0, 1]), epsilon=1.0, num_categories=3, shape=(0,)
    )
    assert out.shape == (0,)
