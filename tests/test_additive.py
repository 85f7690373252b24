"""Laplace and the analytic Gaussian mechanism against their exact laws."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from laws import analytic_gaussian_sigma, assert_matches_cdf

import jaxdp
from jaxdp._additive import analytic_gaussian_sigma as jaxdp_sigma

N = 300_000


@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.3, 2.0), (5.0, 0.1)])
def test_laplace_law(eps, sens):
    values = jnp.array([0.0, 10.0, -3.0])
    out = jaxdp.laplace(jax.random.key(0), values, epsilon=eps, sensitivity=sens, shape=(N, 3))
    assert out.shape == (N, 3)
    for j in range(3):
        cdf = scipy.stats.laplace(loc=float(values[j]), scale=sens / eps).cdf
        assert_matches_cdf(out[:, j], cdf)
    with pytest.raises(AssertionError):  # a scale off by 5% is caught
        assert_matches_cdf(out[:, 0], scipy.stats.laplace(scale=1.05 * sens / eps).cdf)


@pytest.mark.parametrize(
    "eps,delta,sens", [(1.0, 1e-5, 1.0), (0.1, 1e-6, 3.0), (4.0, 1e-3, 0.5), (20.0, 1e-12, 1.0)]
)
def test_analytic_sigma_matches_scipy_root(eps, delta, sens):
    expected = analytic_gaussian_sigma(eps, delta, sens)
    got = jaxdp_sigma(eps, delta, sens)
    assert got >= expected * (1 - 1e-9)  # never less noise than required
    np.testing.assert_allclose(got, expected, rtol=1e-8)


def test_analytic_sigma_known_value_and_extremes():
    # Balle & Wang (2018): at eps = 1, delta = 1e-5, sigma ~ 3.73 (classical: 4.84).
    np.testing.assert_allclose(jaxdp_sigma(1.0, 1e-5, 1.0), 3.7306, rtol=1e-4)
    for eps, delta in [(1e-4, 1e-5), (100.0, 1e-300), (1e3, 0.5)]:
        s = jaxdp_sigma(eps, delta, 1.0)
        assert np.isfinite(s) and s > 0


@pytest.mark.parametrize("eps,delta,sens", [(1.0, 1e-5, 1.0), (0.5, 1e-8, 2.0)])
def test_gaussian_law(eps, delta, sens):
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    out = jaxdp.gaussian(
        jax.random.key(1), jnp.array(2.0), epsilon=eps, delta=delta, sensitivity=sens, shape=(N,)
    )
    assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=sigma).cdf)
    with pytest.raises(AssertionError):  # the classical, larger sigma is caught
        classical = sens * np.sqrt(2 * np.log(1.25 / delta)) / eps
        assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=classical).cdf)
    with pytest.raises(AssertionError):
        assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=0.97 * sigma).cdf)


def test_gaussian_traced_sigma_matches_concrete():
    f = jax.jit(functools.partial(jaxdp.gaussian, jax.random.key(2), jnp.zeros(4), sensitivity=1.0))
    traced = f(epsilon=1.0, delta=1e-5)
    concrete = jaxdp.gaussian(
        jax.random.key(2), jnp.zeros(4), epsilon=1.0, delta=1e-5, sensitivity=1.0
    )
    np.testing.assert_allclose(traced, concrete, rtol=1e-4)


def test_gaussian_vmap_over_epsilon():
    eps = jnp.array([0.5, 1.0, 2.0])
    out = jax.vmap(
        lambda e: jaxdp.gaussian(
            jax.random.key(3),
            jnp.zeros(()),
            epsilon=e,
            delta=1e-5,
            sensitivity=1.0,
            shape=(50_000,),
        )
    )(eps)
    for i, e in enumerate([0.5, 1.0, 2.0]):
        sigma = analytic_gaussian_sigma(e, 1e-5, 1.0)
        assert_matches_cdf(out[i], scipy.stats.norm(scale=sigma).cdf)
