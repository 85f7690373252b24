"""One-shot Gumbel top-k against the exact law of k peeling rounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import assert_matches_law, top_k_law

import jaxdp
from jaxdp import _noisy_kernels, _top_k, _tuning

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


# --------------------------------------------------------------- every layout, both precisions

ROW = np.array([0.0, 2.0, 1.0, 3.0, 2.5, 1.5])
#: RACE_CHUNK that makes the race take each layout of _noisy_kernels.race_plan.
LAYOUT_CHUNK = {"draws": None, "rows": 60, "long": 4}


def _encode(draws, n):
    """Ordered tuples of distinct indices as integers in base n."""
    return np.asarray(draws) @ (n ** np.arange(draws.shape[-1] - 1, -1, -1))


def _tuple_law(scores, k, epsilon):
    tuples, probs = top_k_law(scores, k, epsilon, 1.0)
    law = np.zeros(len(scores) ** k)
    law[[int(np.dot(t, len(scores) ** np.arange(k - 1, -1, -1))) for t in tuples]] = probs
    return law


@pytest.mark.parametrize("k", [_top_k.FLOAT32_ROUNDS, _top_k.FLOAT32_ROUNDS + 1])
@pytest.mark.parametrize("layout", sorted(LAYOUT_CHUNK))
def test_law_in_every_layout_and_precision(layout, k, monkeypatch):
    """k <= FLOAT32_ROUNDS peels in float32, larger k in float64: both, in each layout
    the race can take (several draws of a row a step, a block of rows, a long row
    scanned block by block), against the exact law of the ordered k-tuples."""
    n, draws, eps = len(ROW), 200_000, k * 1.0  # each round at eps / (2k) = 0.5
    if LAYOUT_CHUNK[layout] is not None:
        monkeypatch.setitem(_tuning.RACE_CHUNK, _tuning.kind(), LAYOUT_CHUNK[layout])
    if layout == "rows":
        scores, shape, num_lead, num_rows = np.tile(ROW, (draws, 1)), None, 1, draws
    else:
        draws = draws if layout == "draws" else 20_000  # a lax.map step per draw
        scores, shape, num_lead, num_rows = ROW, (draws,), draws, 1
    plan = _noisy_kernels.race_plan(num_lead, num_rows, n, _tuning.race_chunk())
    assert plan[0] == layout
    out = jaxdp.top_k(jax.random.key(5), scores, k, epsilon=eps, sensitivity=1.0, shape=shape)
    out = np.asarray(out).reshape(-1, k)
    assert np.all(np.sort(out, axis=-1)[:, 1:] != np.sort(out, axis=-1)[:, :-1])
    ids = _encode(out, n)
    assert_matches_law(ids, _tuple_law(ROW, k, eps))
    with pytest.raises(AssertionError):  # each round at 0.6 instead of 0.5
        assert_matches_law(ids, _tuple_law(ROW, k, 1.2 * eps))


@pytest.mark.parametrize("k", [_top_k.FLOAT32_ROUNDS, _top_k.FLOAT32_ROUNDS + 1])
def test_integer_scores_in_both_precisions(k):
    counts = np.array([0, 2, 1, 3, 5, 1], np.int32)
    out = jaxdp.top_k(
        jax.random.key(6), counts, k, epsilon=k * 1.0, sensitivity=1.0, shape=(200_000,)
    )
    ids = _encode(np.asarray(out), len(counts))
    assert_matches_law(ids, _tuple_law(counts, k, k * 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(ids, _tuple_law(counts, k, 1.2 * k))


def test_more_than_float32_rounds_peel_in_float64():
    """Each float32 round adds up to 40 * 2**-24 to ε; past FLOAT32_ROUNDS the sum
    would pass DESIGN.md's ε + 1e-5, so those k peel in float64."""
    per_round = _top_k.ROUND_EXCESS[np.dtype(np.float32)]
    assert _top_k.FLOAT32_ROUNDS * per_round <= 1e-5 < (_top_k.FLOAT32_ROUNDS + 1) * per_round

    def program(k):
        return str(
            jax.make_jaxpr(
                lambda key: jaxdp.top_k(key, jnp.asarray(ROW), k, epsilon=1.0, sensitivity=1.0)
            )(jax.random.key(0))
        )

    assert "f64" not in program(_top_k.FLOAT32_ROUNDS)
    assert "f64" in program(_top_k.FLOAT32_ROUNDS + 1)
    for n, k in [(10, 5), (10**3, 100), (10**6, 10**3), (10**6, 10**6)]:
        eps_prime, _ = _top_k.guarantee(n, k, 1.0)
        assert eps_prime - 1.0 <= 1e-5, (n, k, eps_prime)
