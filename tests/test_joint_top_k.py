"""joint_top_k against the exact law of the joint exponential mechanism over
ordered k-tuples, enumerated in NumPy float64."""

from __future__ import annotations

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.experimental import checkify
from laws import assert_matches_law, top_k_law

import jaxdp

KEY = jax.random.key(0)
DRAWS = 200_000
SCORES = np.array([3.0, 7.0, 5.0, 5.0, -np.inf, 1.0])  # a tie and an excluded outcome


def joint_law(scores, k, epsilon, sensitivity, monotonic=False):
    """(tuples, probs): P(s) ∝ exp(-eps max_i(c_(i) - c_{s_i}) / (2 Δ_u)), by enumeration."""
    c = np.asarray(scores, np.float64)
    top = np.sort(c)[::-1][:k]
    delta_u = sensitivity if monotonic else 2 * sensitivity
    tuples = list(itertools.permutations(range(len(c)), k))
    with np.errstate(invalid="ignore"):
        errs = np.array([np.max(top - c[list(t)]) for t in tuples])
    logw = np.where(np.isfinite(errs), -epsilon * errs / (2 * delta_u), -np.inf)
    return tuples, np.exp(logw - scipy.special.logsumexp(logw))


def tuple_ids(draws, tuples, n):
    d = np.asarray(draws).reshape(-1, np.asarray(draws).shape[-1])
    weights = n ** np.arange(d.shape[-1])
    codes = np.array([np.dot(t, weights) for t in tuples])
    order = np.argsort(codes)
    pos = np.searchsorted(codes[order], d @ weights)
    assert np.all(codes[order][np.clip(pos, 0, len(codes) - 1)] == d @ weights)
    return order[pos]


@pytest.mark.parametrize("k, eps, monotonic", [(3, 2.0, False), (2, 1.0, True), (1, 3.0, False)])
def test_law_of_ordered_tuples(k, eps, monotonic):
    draws = jaxdp.joint_top_k(
        KEY, SCORES, k, epsilon=eps, sensitivity=1.0, monotonic=monotonic, shape=(DRAWS,)
    )
    assert draws.shape == (DRAWS, k) and draws.dtype == jnp.int32
    d = np.asarray(draws)
    assert np.all(d >= 0) and not np.any(d == 4)
    assert all(len(set(row)) == k for row in d[:1000])
    tuples, probs = joint_law(SCORES, k, eps, 1.0, monotonic)
    ids = tuple_ids(d, tuples, len(SCORES))
    assert_matches_law(ids, probs)
    with pytest.raises(AssertionError):  # the other sensitivity convention is caught
        assert_matches_law(ids, joint_law(SCORES, k, eps, 1.0, not monotonic)[1])
    if k > 1:
        with pytest.raises(AssertionError):  # peeling at eps/k is a different law
            assert_matches_law(
                ids, top_k_law(np.where(np.isinf(SCORES), -60, SCORES), k, eps, 1.0)[1]
            )


def test_counts_law_larger_n_and_batch_rows():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 6, size=(2, 7)).astype(np.float32)
    draws = jaxdp.joint_top_k(
        KEY,
        counts,
        2,
        epsilon=jnp.array([1.0, 4.0]),
        sensitivity=1.0,
        monotonic=True,
        shape=(DRAWS // 2, 2),
    )
    assert draws.shape == (DRAWS // 2, 2, 2)
    for r, eps in enumerate([1.0, 4.0]):
        tuples, probs = joint_law(counts[r], 2, eps, 1.0, True)
        assert_matches_law(tuple_ids(draws[:, r], tuples, 7), probs)


def test_equal_scores_give_uniform_tuples():
    draws = jaxdp.joint_top_k(KEY, jnp.zeros(4), 2, epsilon=1.0, sensitivity=1.0, shape=(DRAWS,))
    tuples, probs = joint_law(np.zeros(4), 2, 1.0, 1.0)
    assert np.allclose(probs, 1 / 12)
    assert_matches_law(tuple_ids(draws, tuples, 4), probs)


def test_axis_and_integer_scores():
    s = jnp.array([[1, 9], [5, 2], [8, 3]])  # outcomes along axis 0
    a = jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0, axis=0, shape=(5, 2))
    b = jaxdp.joint_top_k(KEY, s.T, 2, epsilon=1.0, sensitivity=1.0, shape=(5, 2))
    np.testing.assert_array_equal(a, b)
    big = jnp.array([2**24 + 1, 2**24, 0], jnp.int32)  # exact gaps above 2**24
    out = jaxdp.joint_top_k(KEY, big, 1, epsilon=4.0, sensitivity=1.0, shape=(2000,))
    # P[0] = 1 / (1 + e**-1) = 0.731 (the gap of 1 is kept); sd 0.01
    assert 0.69 < np.mean(np.asarray(out) == 0) < 0.77


def test_jit_eager_vmap_over_epsilon_no_retrace():
    s = jnp.asarray(SCORES)
    eager = jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0, shape=(20,))
    jitted = jax.jit(
        lambda k: jaxdp.joint_top_k(k, s, 2, epsilon=1.0, sensitivity=1.0, shape=(20,))
    )(KEY)
    np.testing.assert_array_equal(eager, jitted)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(eps):
        return jaxdp.joint_top_k(KEY, s, 2, epsilon=eps, sensitivity=1.0)

    grid = jnp.array([0.1, 1.0, 10.0])
    assert jax.vmap(run)(grid).shape == (3, 2)
    assert jax.vmap(run)(2 * grid).shape == (3, 2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=jnp.nan), "epsilon"),
        (dict(sensitivity=-1.0), "sensitivity"),
        (dict(k=0), "k"),
        (dict(k=7), "k"),
        (dict(k=True), "k"),
        (dict(k=6), "finite"),
        (dict(monotonic=1), "monotonic"),
        (dict(axis=2), "axis"),
        (dict(shape=(-1,)), "shape"),
        (dict(scores=np.array([1.0, np.nan, 2.0, 0, 0, 0])), "NaN"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(scores=SCORES, k=2, epsilon=1.0, sensitivity=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        jaxdp.joint_top_k(KEY, args.pop("scores"), args.pop("k"), **args)


def test_traced_invalid_gives_minus_one_and_checkify_reports():
    def f(eps):
        return jaxdp.joint_top_k(KEY, jnp.asarray(SCORES), 2, epsilon=eps, sensitivity=1.0)

    assert np.all(np.asarray(jax.jit(f)(-1.0)) == -1)
    err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(-1.0)
    assert "epsilon" in str(err.get())
