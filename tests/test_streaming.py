"""Tests of exponential_streaming: law, memory bound, arguments, jit/vmap, shapes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.experimental import checkify

import jaxdp
from jaxdp import _streaming

N = 100
EPS = 1.0
DELTA = 1.0
DRAWS = 100_000  # chi-square tests (discrete); KS tests elsewhere use 2e5


def peaked(i):
    """A profile peaked at 30; the running maximum moves over the first chunks."""
    return -jnp.abs(i.astype(jnp.float32) - 30.0) / 3.0


def peaked_np(n=N):
    return -np.abs(np.arange(n, dtype=np.float64) - 30.0) / 3.0


def with_data(i, data):
    return -jnp.abs(i.astype(jnp.float32) - data["center"]) * data["slope"]


def exact_law(scores, epsilon, sensitivity, monotonic=False):
    """Exponential-mechanism probabilities in NumPy float64."""
    factor = epsilon / (sensitivity if monotonic else 2 * sensitivity)
    logits = factor * (scores - scores.max())
    p = np.exp(logits)
    return p / p.sum()


def assert_matches_law(draws, probs, alpha=1e-3):
    counts = np.bincount(np.asarray(draws).ravel(), minlength=len(probs))
    assert counts.size == len(probs), "drew an index out of range"
    assert counts[probs == 0].sum() == 0, "drew an outcome of probability 0"
    expected = probs * counts.sum()
    big = expected >= 5  # pool the tail into one bin
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    pvalue = scipy.stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
    assert pvalue > alpha, (pvalue, obs, exp)


def draw(method, chunk_size, shape=(DRAWS,), key=0, **kw):
    kw.setdefault("epsilon", EPS)
    kw.setdefault("sensitivity", DELTA)
    return jaxdp.exponential_streaming(
        jax.random.key(key), peaked, N, chunk_size=chunk_size, shape=shape, method=method, **kw
    )


# ----------------------------------------------------------------------------- law


@pytest.mark.parametrize(
    "method, chunk_size",
    [
        ("gumbel", 7),  # 100 = 14 * 7 + 2: masked tail
        ("inverse_cdf", 7),  # many draws per chunk: sorted-target histogram pass
        ("inverse_cdf", 64),
    ],
)
def test_matches_exact_law(method, chunk_size):
    draws = draw(method, chunk_size)
    assert draws.dtype == jnp.int32 and draws.shape == (DRAWS,)
    probs = exact_law(peaked_np(), EPS, DELTA)
    assert_matches_law(draws, probs)
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exact_law(peaked_np(), 0.9 * EPS, DELTA))


def test_few_draws_pass_matches_exact_law():
    # draws <= chunk: each draw binary-searches each chunk (the other inverse-CDF pass)
    n = 5000
    scores = -np.abs(np.arange(n) - 1234.0) / 40.0
    draws = jax.vmap(
        lambda k: jaxdp.exponential_streaming(
            k,
            lambda i: -jnp.abs(i.astype(jnp.float32) - 1234.0) / 40.0,
            n,
            epsilon=EPS,
            sensitivity=DELTA,
            chunk_size=1024,
            shape=(1000,),
            method="inverse_cdf",
        )
    )(jax.random.split(jax.random.key(3), 200))
    probs = exact_law(scores, EPS, DELTA)
    assert_matches_law(draws, probs)
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exact_law(scores, 0.9 * EPS, DELTA))


def test_equal_in_law_to_materialised():
    """Two-sample chi-square: streaming (both methods) against exponential."""
    materialised = jaxdp.exponential(
        jax.random.key(11),
        jnp.asarray(peaked_np(), jnp.float32),
        epsilon=EPS,
        sensitivity=DELTA,
        shape=(DRAWS,),
    )
    probs = exact_law(peaked_np(), EPS, DELTA)
    assert_matches_law(materialised, probs)
    common = probs * DRAWS >= 5
    for method in ("gumbel", "inverse_cdf"):
        streamed = draw(method, 9, key=12)
        table = np.stack(
            [np.bincount(np.asarray(x), minlength=N)[common] for x in (streamed, materialised)]
        )
        assert scipy.stats.chi2_contingency(table).pvalue > 1e-3


def test_methods_are_one_sound_sampler():
    # Both methods are the two-pass exponential race (the chunked inverse CDF
    # misplaced mass among small outcomes in float32): same key, same draws.
    a = draw("inverse_cdf", 7, shape=(2000,), key=5)
    b = draw("gumbel", 7, shape=(2000,), key=5)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_monotonic_law():
    draws = draw("inverse_cdf", 13, monotonic=True)
    assert_matches_law(draws, exact_law(peaked_np(), EPS, DELTA, monotonic=True))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exact_law(peaked_np(), EPS, DELTA))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_large_offset_and_increasing_scores(method):
    # Scores grow along the range, so the running maximum moves in every chunk,
    # on top of an offset of 1e4.
    n = 64
    scores = 1e4 + np.arange(n) / 8.0

    def fn(i):
        return 1e4 + i.astype(jnp.float32) / 8.0

    draws = jaxdp.exponential_streaming(
        jax.random.key(2),
        fn,
        n,
        epsilon=EPS,
        sensitivity=DELTA,
        chunk_size=5,
        shape=(50_000,),
        method=method,
    )
    assert_matches_law(draws, exact_law(scores, EPS, DELTA))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_tail_and_masked_candidates(method):
    n = 23  # 23 = 2 * 10 + 3

    def only(i, target):
        return jnp.where(i == target, 0.0, -jnp.inf)

    for want in (n - 1, 0):  # one compiled function: the target is data
        out = jaxdp.exponential_streaming(
            jax.random.key(0),
            only,
            n,
            epsilon=1.0,
            sensitivity=1.0,
            chunk_size=10,
            shape=(100,),
            method=method,
            data=jnp.int32(want),
        )
        assert np.all(np.asarray(out) == want)


def test_score_fn_sees_only_valid_indices():
    n = 23
    table = jnp.arange(n, dtype=jnp.float32)

    def fn(i):  # out-of-range indices would be clamped by gather; check them directly
        ok = (i >= 0) & (i < n)
        return jnp.where(ok, table[i] * 0.0, jnp.nan)

    out = jaxdp.exponential_streaming(
        jax.random.key(0), fn, n, epsilon=1.0, sensitivity=1.0, chunk_size=10, shape=(50,)
    )
    assert out.shape == (50,) and np.all((np.asarray(out) >= 0) & (np.asarray(out) < n))


# ----------------------------------------------------------------------------- memory


def _temp_bytes(n, chunk, draws, method):
    compiled = _streaming._streaming_impl.lower(
        jax.random.key(0),
        None,
        jnp.float32(1.0),
        jnp.float32(1.0),
        score_fn=peaked,
        num_candidates=n,
        chunk=chunk,
        monotonic=False,
        shape=(draws,),
        method=method,
        has_data=False,
    ).compile()
    analysis = compiled.memory_analysis()
    if analysis is None:
        pytest.skip("memory_analysis is not available on this backend")
    return analysis.temp_size_in_bytes


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_memory_independent_of_num_candidates(method):
    chunk, draws = 4096, 64
    small = _temp_bytes(10**6, chunk, draws, method)
    huge = _temp_bytes(10**9, chunk, draws, method)
    assert huge == small
    # O(chunk x draws): a few float32 words per (candidate, draw) of one chunk.
    assert huge <= 16 * chunk * draws + 4 * 2**20
    # ... and nowhere near one word per candidate
    assert huge < 10**9 // 100


def test_memory_is_chunk_times_draws():
    # The race keeps O(chunk x draws): a few words per (candidate, draw) of a chunk.
    chunk = 4096
    few = _temp_bytes(10**8, chunk, 16, "inverse_cdf")
    many = _temp_bytes(10**8, chunk, 1024, "inverse_cdf")
    assert few <= 16 * chunk * 16 + 2**20
    assert many <= 16 * chunk * 1024 + 2**20


# ----------------------------------------------------------------------------- arguments


KEY = jax.random.key(0)
GOOD = dict(epsilon=1.0, sensitivity=1.0, chunk_size=8)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((KEY, peaked, N), dict(GOOD, chunk_size=0), "chunk_size"),
        ((KEY, peaked, N), dict(GOOD, chunk_size=-3), "chunk_size"),
        ((KEY, peaked, N), dict(GOOD, chunk_size=2.5), "chunk_size"),
        ((KEY, peaked, N), dict(GOOD, chunk_size=True), "chunk_size"),
        ((KEY, peaked, 0), GOOD, "num_candidates"),
        ((KEY, peaked, -5), GOOD, "num_candidates"),
        ((KEY, peaked, 2**31), GOOD, "num_candidates"),
        ((KEY, peaked, 10.0), GOOD, "num_candidates"),
        ((KEY, "peaked", N), GOOD, "score_fn"),
        ((KEY, None, N), GOOD, "score_fn"),
        ((KEY, peaked, N), dict(GOOD, epsilon=0.0), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, epsilon=-1.0), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, epsilon=float("nan")), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, epsilon=float("inf")), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, epsilon=None), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, epsilon=jnp.array([1.0, -1.0])), "epsilon"),
        ((KEY, peaked, N), dict(GOOD, sensitivity=0.0), "sensitivity"),
        ((KEY, peaked, N), dict(GOOD, method="fast"), "method"),
        ((KEY, peaked, N), dict(GOOD, epsilon=jnp.ones(2), shape=(5, 3)), "shape"),
        ((KEY, peaked, N), dict(GOOD, shape=(-1,)), "shape"),
        ((jax.random.split(KEY, 2), peaked, N), GOOD, "key"),
        ((0, peaked, N), GOOD, "key"),
        ((KEY, lambda i: jnp.zeros(3), N), GOOD, "shape"),
        ((KEY, lambda i: jnp.zeros(()), N), GOOD, "shape"),
        ((KEY, lambda i: i.astype(jnp.complex64), N), GOOD, "real"),
        ((KEY, lambda i, d: i * 1.0, N), GOOD, "score_fn"),
        ((KEY, lambda i: jnp.stack([i, i]) * 1.0, N), dict(GOOD, epsilon=jnp.ones(3)), "broadcast"),
    ],
)
def test_bad_arguments_raise(args, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        jaxdp.exponential_streaming(*args, **kwargs)
    assert "exponential_streaming" in str(info.value)


def test_bad_scores_raise_when_concrete():
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        jaxdp.exponential_streaming(KEY, lambda i: jnp.where(i == 57, jnp.nan, 0.0), N, **GOOD)
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        jaxdp.exponential_streaming(
            KEY, lambda i: jnp.where(i == 99, jnp.inf, 0.0), N, **GOOD, method="gumbel"
        )
    with pytest.raises(ValueError, match="-inf"):
        jaxdp.exponential_streaming(KEY, lambda i: jnp.full(i.shape, -jnp.inf), N, **GOOD)


def _nan_at(i, bad):
    return jnp.where(i == bad, jnp.nan, peaked(i))


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf"])
def test_traced_bad_values_give_minus_one_and_checkify_reports(method):
    def run(eps, bad):
        return jaxdp.exponential_streaming(
            KEY,
            _nan_at,
            N,
            epsilon=eps,
            sensitivity=1.0,
            chunk_size=8,
            shape=(4,),
            method=method,
            data=bad,
        )

    plain = jax.jit(run)
    assert np.all(np.asarray(plain(-1.0, -1)) == -1)  # bad epsilon
    assert np.all(np.asarray(plain(1.0, 57)) == -1)  # NaN score
    assert np.all(np.asarray(plain(1.0, -1)) >= 0)
    checked = checkify.checkify(plain, errors=checkify.user_checks)
    err, _ = checked(-1.0, -1)
    assert "epsilon must be finite and > 0" in str(err.get())
    err, _ = checked(1.0, 57)
    assert "NaN or +inf" in str(err.get())
    err, good = checked(1.0, -1)  # a good call reports nothing
    assert err.get() is None and np.all(np.asarray(good) >= 0)


def test_vmap_over_epsilon_array_rows_are_independent_epsilons():
    eps = jnp.array([0.05, 1.0, 20.0])
    batched = jaxdp.exponential_streaming(
        KEY, peaked, N, epsilon=eps, sensitivity=1.0, chunk_size=16, shape=(20_000, 3)
    )
    vmapped = jax.vmap(
        lambda e: jaxdp.exponential_streaming(
            KEY, peaked, N, epsilon=e, sensitivity=1.0, chunk_size=16, shape=(20_000,)
        ),
        out_axes=1,
    )(eps)
    assert batched.shape == vmapped.shape == (20_000, 3)
    for col in range(3):
        probs = exact_law(peaked_np(), float(eps[col]), 1.0)
        assert_matches_law(batched[:, col], probs)
        assert_matches_law(vmapped[:, col], probs)


def test_jit_equals_eager_and_key_semantics():
    kw = dict(epsilon=1.0, sensitivity=1.0, chunk_size=16, shape=(1000,))
    eager = jaxdp.exponential_streaming(KEY, peaked, N, **kw)
    jitted = jax.jit(lambda k: jaxdp.exponential_streaming(k, peaked, N, **kw))(KEY)
    np.testing.assert_array_equal(eager, jitted)
    legacy = jaxdp.exponential_streaming(jax.random.PRNGKey(0), peaked, N, **kw)
    assert legacy.shape == (1000,)
    again = jaxdp.exponential_streaming(KEY, peaked, N, **kw)
    np.testing.assert_array_equal(eager, again)
    other = jaxdp.exponential_streaming(jax.random.key(1), peaked, N, **kw)
    assert not np.array_equal(eager, other)
    keys = jax.random.split(KEY, 4)
    per_key = jax.vmap(lambda k: jaxdp.exponential_streaming(k, peaked, N, **kw))(keys)
    assert per_key.shape == (4, 1000)
    np.testing.assert_array_equal(per_key[2], jaxdp.exponential_streaming(keys[2], peaked, N, **kw))


def test_data_argument_compiles_once_for_many_datasets():
    traces = []

    def score_fn(i, data):
        traces.append(1)
        return with_data(i, data)

    def run(center, eps):
        data = {"center": jnp.float32(center), "slope": jnp.float32(1.0)}
        return jaxdp.exponential_streaming(
            KEY,
            score_fn,
            1000,
            epsilon=eps,
            sensitivity=1.0,
            chunk_size=128,
            shape=(2000,),
            data=data,
        )

    a = run(100.0, 4.0)
    count = len(traces)
    b = run(700.0, 4.0)
    c = run(300.0, 2.0)
    assert len(traces) == count  # no retrace for new data or a new epsilon
    assert abs(np.median(np.asarray(a)) - 100) <= 2
    assert abs(np.median(np.asarray(b)) - 700) <= 2
    assert abs(np.median(np.asarray(c)) - 300) <= 3


@pytest.mark.parametrize(
    "shape, eps, want",
    [
        (None, 1.0, ()),
        ((7,), 1.0, (7,)),
        ((2, 7), 1.0, (2, 7)),
        (None, jnp.ones(3), (3,)),
        ((5, 3), jnp.ones(3), (5, 3)),
        ((0,), 1.0, (0,)),
    ],
)
def test_shape_semantics(shape, eps, want):
    # traced only (no compile): the output shape follows jax.random.categorical
    out = jax.eval_shape(
        lambda: jaxdp.exponential_streaming(
            KEY, peaked, N, epsilon=eps, sensitivity=1.0, chunk_size=16, shape=shape
        )
    )
    assert out.shape == want and out.dtype == jnp.int32


def test_batched_score_rows():
    def two_rows(i):
        x = i.astype(jnp.float32)
        return jnp.stack([-jnp.abs(x - 10.0), -jnp.abs(x - 80.0)])

    for method in ("gumbel", "inverse_cdf"):
        out = jaxdp.exponential_streaming(
            KEY,
            two_rows,
            N,
            epsilon=40.0,
            sensitivity=1.0,
            chunk_size=16,
            shape=(6, 2),
            method=method,
        )
        assert out.shape == (6, 2)
        np.testing.assert_array_equal(out, np.tile([10, 80], (6, 1)))
    default = jax.eval_shape(
        lambda: jaxdp.exponential_streaming(
            KEY, two_rows, N, epsilon=40.0, sensitivity=1.0, chunk_size=16
        )
    )
    assert default.shape == (2,)


def test_float64_under_x64():
    with jax.enable_x64():
        draws = jaxdp.exponential_streaming(
            KEY,
            lambda i: -jnp.abs(i - 30.0) / 3.0,
            N,
            epsilon=EPS,
            sensitivity=DELTA,
            chunk_size=11,
            shape=(50_000,),
        )
        assert draws.dtype == jnp.int32
    assert_matches_law(draws, exact_law(peaked_np(), EPS, DELTA))


@pytest.mark.slow
def test_num_candidates_near_int32_max():
    n = 2**31 - 1
    out = jaxdp.exponential_streaming(
        KEY,
        lambda i: jnp.where(i >= n - 3, 0.0, -jnp.inf),
        n,
        epsilon=1.0,
        sensitivity=1.0,
        chunk_size=2**22,
        shape=(64,),
    )
    assert np.all(np.asarray(out) >= n - 3) and np.all(np.asarray(out) <= n - 1)
