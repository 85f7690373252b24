"""select_private_candidate: the law of the best of T runs against the exact
law of T (its generating function, in NumPy float64)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_cdf, assert_matches_law

import jaxdp
from jaxdp._selection import repetition_log_probs, repetition_tail

KEY = jax.random.key(0)
RUNS = 20_000


def uniform_candidate(k):
    u = jax.random.uniform(k)
    return u, {"value": u, "twice": 2 * u}


def tnb_pmf(gamma, eta, size):
    """P[T = t], t = 1..size, of the truncated negative binomial, by math.lgamma."""
    t = np.arange(1, size + 1)
    logp = np.array(
        [math.lgamma(x + eta) - math.lgamma(eta) - math.lgamma(x + 1) for x in t]
    ) + t * math.log1p(-gamma)
    return np.exp(logp) / (gamma**-eta - 1)


def best_of_uniforms_cdf(gamma, eta, max_repetitions):
    """P[max of T uniforms <= x] = E[x**T], T | T <= M."""
    pmf = tnb_pmf(gamma, eta, max_repetitions)
    pmf = pmf / pmf.sum()
    t = np.arange(1, max_repetitions + 1)
    return lambda x: np.clip(np.asarray(x, np.float64), 0, 1)[..., None] ** t @ pmf


def draw(gamma, eta, max_repetitions, runs=RUNS):
    def one(k):
        return jaxdp.select_private_candidate(
            k,
            uniform_candidate,
            epsilon=1.0,
            stop_probability=gamma,
            eta=eta,
            max_repetitions=max_repetitions,
        )

    return jax.jit(jax.vmap(one))(jax.random.split(KEY, runs))


@pytest.mark.parametrize("gamma, eta, m", [(0.2, 1.0, 200), (0.3, 2.5, 200), (0.1, 0.5, 40)])
def test_best_of_t_law(gamma, eta, m):
    score, cand = draw(gamma, eta, m)
    s = np.asarray(score)
    np.testing.assert_array_equal(s, np.asarray(cand["value"]))
    np.testing.assert_array_equal(2 * s, np.asarray(cand["twice"]))
    assert_matches_cdf(s, best_of_uniforms_cdf(gamma, eta, m))
    with pytest.raises(AssertionError):  # a different stop probability is caught
        assert_matches_cdf(s, best_of_uniforms_cdf(gamma * 1.2, eta, m))


def test_law_of_t_itself():
    # score = -run index within a block is not observable; use a counter from the key:
    # each run scores 1, so the best is the first run; instead count runs with a
    # candidate whose score is a Bernoulli: P[best = 1] = 1 - E[(1 - b)**T]
    b = 0.3

    def cand(k):
        hit = jax.random.uniform(k) < b
        return hit.astype(jnp.float32), hit

    def one(k):
        return jaxdp.select_private_candidate(
            k, cand, epsilon=1.0, stop_probability=0.25, max_repetitions=64
        )[0]

    s = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(KEY, RUNS))).astype(int)
    pmf = tnb_pmf(0.25, 1.0, 64)
    pmf = pmf / pmf.sum()
    p_hit = 1 - np.sum(pmf * (1 - b) ** np.arange(1, 65))
    assert_matches_law(s, [1 - p_hit, p_hit])
    with pytest.raises(AssertionError):  # T = 1 always would be b
        assert_matches_law(s, [1 - b, b])


def test_truncation_is_conditioning_on_t_at_most_m():
    score, _ = draw(0.05, 1.0, 3)  # mean 20 but at most 3 runs
    assert_matches_cdf(np.asarray(score), best_of_uniforms_cdf(0.05, 1.0, 3))


def test_repetition_helpers():
    lp = repetition_log_probs(0.2, 1.0, 50)
    np.testing.assert_allclose(np.exp(lp), 0.2 * 0.8 ** np.arange(50), rtol=1e-12)
    np.testing.assert_allclose(
        np.exp(repetition_log_probs(0.3, 2.5, 80)), tnb_pmf(0.3, 2.5, 80), rtol=1e-10
    )
    assert repetition_tail(0.1, 1.0, 300) == pytest.approx(0.9**300, rel=1e-12)
    tail = repetition_tail(0.3, 2.5, 20)
    assert tail == pytest.approx(1 - tnb_pmf(0.3, 2.5, 20).sum(), rel=1e-8)
    assert repetition_tail(1.0, 1.0, 1) == 0.0


def test_default_truncation_meets_its_delta():
    from jaxdp._selection import _auto_max_repetitions

    m = _auto_max_repetitions("f", 0.1, 1.0, 3.0)
    assert math.exp(3.0) * repetition_tail(0.1, 1.0, m) <= 1e-12
    assert math.exp(3.0) * repetition_tail(0.1, 1.0, m - 1) > 1e-12
    score, cand = jaxdp.select_private_candidate(
        KEY, uniform_candidate, epsilon=1.0, stop_probability=0.1
    )
    assert score.shape == () and float(score) == float(cand["value"])


def test_stop_probability_one_runs_once():
    # gamma = 1: T = 1 surely (the tail test never saw a falling tail of -inf)
    from jaxdp._selection import _auto_max_repetitions

    assert _auto_max_repetitions("f", 1.0, 1.0, 3.0) == 1

    def candidate(k):
        return jax.random.uniform(k), jax.random.uniform(k)

    score, cand = jaxdp.select_private_candidate(KEY, candidate, epsilon=1.0, stop_probability=1.0)
    assert float(score) == float(cand)


def test_jit_equals_eager_and_key_matters():
    kw = dict(epsilon=1.0, stop_probability=0.2, max_repetitions=50)
    eager = jaxdp.select_private_candidate(KEY, uniform_candidate, **kw)
    jitted = jax.jit(lambda k: jaxdp.select_private_candidate(k, uniform_candidate, **kw))(KEY)
    assert float(eager[0]) == float(jitted[0])
    other = jaxdp.select_private_candidate(jax.random.key(1), uniform_candidate, **kw)
    assert float(other[0]) != float(eager[0])
    legacy = jaxdp.select_private_candidate(jax.random.PRNGKey(0), uniform_candidate, **kw)
    assert legacy[0].shape == ()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(stop_probability=0.0), "stop_probability"),
        (dict(stop_probability=1.5), "stop_probability"),
        (dict(stop_probability=True), "stop_probability"),
        (dict(eta=0.0), "eta"),
        (dict(eta=float("nan")), "eta"),
        (dict(eta=False), "eta"),
        (dict(max_repetitions=0), "max_repetitions"),
        (dict(max_repetitions=True), "max_repetitions"),
        (dict(max_repetitions=2.5), "max_repetitions"),
        (dict(stop_probability=1e-9), "max_repetitions"),
        (dict(candidate_fn=3), "callable"),
        (dict(candidate_fn=lambda k: (jnp.zeros(2), 0.0)), "scalar"),
        (dict(candidate_fn=lambda k: jnp.zeros(())), "pair"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(candidate_fn=uniform_candidate, epsilon=1.0, stop_probability=0.2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        jaxdp.select_private_candidate(KEY, args.pop("candidate_fn"), **args)


def test_traced_epsilon_needs_max_repetitions():
    def f(eps):
        return jaxdp.select_private_candidate(
            KEY, uniform_candidate, epsilon=eps, stop_probability=0.2
        )[0]

    with pytest.raises(ValueError, match="max_repetitions"):
        jax.jit(f)(1.0)
    g = jax.jit(
        lambda eps: jaxdp.select_private_candidate(
            KEY, uniform_candidate, epsilon=eps, stop_probability=0.2, max_repetitions=30
        )[0]
    )
    assert g(1.0).shape == ()
