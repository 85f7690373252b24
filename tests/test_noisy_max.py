"""Report-noisy-max and permute-and-flip against their exact float64 laws."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import (
    assert_matches_law,
    exponential_law,
    laplace_noisy_max_law,
    permute_and_flip_law,
)

import jaxdp
from jaxdp import _tuning

N_DRAWS = 10**6
SCORES = np.array([0.0, 1.0, 2.0, 2.0, 3.5, -1.0])
EPS, DELTA = 1.1, 0.9


@pytest.mark.parametrize("monotonic", [False, True])
def test_laplace_law(monotonic):
    draws = jaxdp.report_noisy_max(
        jax.random.key(0),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        noise="laplace",
        monotonic=monotonic,
        shape=(N_DRAWS,),
    )
    assert_matches_law(draws, laplace_noisy_max_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):  # the other scale (factor 2) is caught
        assert_matches_law(draws, laplace_noisy_max_law(SCORES, EPS, DELTA, not monotonic))
    with pytest.raises(AssertionError):  # Laplace RNM is not the exponential mechanism
        assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, monotonic))


@pytest.mark.parametrize("monotonic", [False, True])
def test_gumbel_law_is_exponential(monotonic):
    draws = jaxdp.report_noisy_max(
        jax.random.key(1),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        noise="gumbel",
        monotonic=monotonic,
        shape=(N_DRAWS,),
    )
    assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, not monotonic))


# (rows, n, draws per row, what exponential(method="auto") draws them with): every
# kernel and layout its dispatcher can pick, each checked to be picked below.
# Half of them monotonic.
GUMBEL_CASES = [
    (64, 20, 1, "gumbel", False),  # the race: one draw per row, few outcomes
    (300, 1000, 1, "descent", True),
    (1, 1000, 10**4, "alias", False),
    (1, 1000, 400, "hybrid1", True),
    (1, 10**4, 10**4, "hybrid2", False),
    (3, 500, 64, "descent", True),
]


@pytest.mark.parametrize("rows,n,draws,how,monotonic", GUMBEL_CASES)
def test_gumbel_noise_draws_are_exponentials(rows, n, draws, how, monotonic):
    """Gumbel noise is drawn by the exponential mechanism's own kernels: the same
    draws as ``exponential`` bit for bit, at every kernel and layout its dispatcher
    picks (and so its law, its speed and its guarantee); invalid rows give -1 in
    both, under jit with traced parameters and under a vmap over an ε grid."""
    if how == "gumbel":
        assert _tuning.choose_method(draws, n, rows) == "gumbel"
    else:
        assert _tuning.choose_method(draws, n, rows) == "inverse_cdf"
        layout = _tuning.layout(n, draws, num_rows=rows)
        depth = _tuning.hybrid_depth(n, draws, num_rows=rows)
        assert layout + (str(depth) if depth else "") == how
    x = np.random.default_rng(n + rows).normal(size=(rows, n)).astype(np.float32) * 3
    x[0, :: max(1, n // 7)] = -np.inf
    shape = (draws, rows) if draws > 1 else (rows,)
    kw = dict(epsilon=0.7, sensitivity=1.5, monotonic=monotonic, shape=shape)
    for key in range(3):
        k = jax.random.key(key)
        rnm = jaxdp.report_noisy_max(k, x, noise="gumbel", **kw)
        np.testing.assert_array_equal(rnm, jaxdp.exponential(k, x, **kw))
    eps = jnp.linspace(0.1, 2.0, 4)
    keys = jax.random.split(k, 4)
    rnm, em = (
        jax.vmap(lambda k, e, fn=fn: fn(k, x[:1], **{**kw, "epsilon": e, "shape": None}))(keys, eps)
        for fn in (functools.partial(jaxdp.report_noisy_max, noise="gumbel"), jaxdp.exponential)
    )
    np.testing.assert_array_equal(rnm, em)
    # traced: a NaN row gives -1 in both
    x[-1, 0] = np.nan
    for fn in (functools.partial(jaxdp.report_noisy_max, noise="gumbel"), jaxdp.exponential):
        call = jax.jit(lambda k, x, e, fn=fn: fn(k, x, **{**kw, "epsilon": e}))
        out = np.asarray(call(k, x, 0.7))
        assert np.all(out[..., -1] == -1) and np.all(out[..., :-1] >= 0)


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_noise_law_is_permute_and_flip(monotonic):
    draws = jaxdp.report_noisy_max(
        jax.random.key(2),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        noise="exponential",
        monotonic=monotonic,
        shape=(N_DRAWS,),
    )
    assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA, not monotonic))


@pytest.mark.parametrize("monotonic", [False, True])
def test_permute_and_flip_law(monotonic):
    """Against the law enumerated over all 720 permutations of 6 outcomes."""
    draws = jaxdp.permute_and_flip(
        jax.random.key(3),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        monotonic=monotonic,
        shape=(N_DRAWS,),
    )
    assert_matches_law(draws, permute_and_flip_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):  # PF differs from EM at the same epsilon
        assert_matches_law(draws, exponential_law(SCORES, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, permute_and_flip_law(SCORES, 0.95 * EPS, DELTA, monotonic))


def test_permute_and_flip_batched_rows_and_neg_inf():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 5)) * 3
    scores[0, 2] = -np.inf
    draws = jaxdp.permute_and_flip(
        jax.random.key(4),
        scores,
        epsilon=np.array([[0.5], [2.0]])[:, 0],
        sensitivity=1.0,
        shape=(400_000, 2),
    )
    finite = np.isfinite(scores[0])
    law0 = np.zeros(5)
    law0[finite] = permute_and_flip_law(scores[0][finite], 0.5, 1.0)
    assert_matches_law(draws[:, 0], law0)
    assert_matches_law(draws[:, 1], permute_and_flip_law(scores[1], 2.0, 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws[:, 1], permute_and_flip_law(scores[1], 0.5, 1.0))


@pytest.mark.parametrize("noise", ["laplace", "gumbel", "exponential"])
def test_ties_uniform_and_neg_inf(noise):
    scores = np.array([2.0, 2.0, 2.0, -np.inf])
    draws = jaxdp.report_noisy_max(
        jax.random.key(5), scores, epsilon=1e4, sensitivity=1.0, noise=noise, shape=(300_000,)
    )
    assert_matches_law(draws, np.array([1, 1, 1, 0]) / 3)
    with pytest.raises(AssertionError):
        assert_matches_law(draws, np.array([0.5, 0.25, 0.25, 0.0]))


def test_permute_and_flip_shares_the_exponential_noise_program():
    """permute_and_flip is report_noisy_max(noise="exponential"): one compiled
    program serves both (the function's name is not a static argument), and
    checkify still names the function that was called."""
    from jax.experimental import checkify

    from jaxdp import _noisy_max

    scores = jax.numpy.asarray(np.linspace(0.0, 1.0, 37, dtype=np.float32))
    kw = dict(epsilon=1.0, sensitivity=1.0, shape=(3,))
    pf = jaxdp.permute_and_flip(jax.random.key(1), scores, **kw)
    size = _noisy_max._noisy_max_impl._cache_size()
    rnm = jaxdp.report_noisy_max(jax.random.key(1), scores, noise="exponential", **kw)
    assert _noisy_max._noisy_max_impl._cache_size() == size
    np.testing.assert_array_equal(np.asarray(pf), np.asarray(rnm))
    for fn in (jaxdp.permute_and_flip, jaxdp.report_noisy_max):
        f = jax.jit(lambda e, fn=fn: fn(jax.random.key(0), scores, epsilon=e, sensitivity=1.0))
        err, out = checkify.checkify(f, errors=checkify.user_checks)(-1.0)
        assert str(err.get()).startswith(f"{fn.__name__}: epsilon must be finite and > 0")
        assert int(out) == -1
        bad = scores.at[3].set(np.nan)
        g = jax.jit(lambda s, fn=fn: fn(jax.random.key(0), s, epsilon=1.0, sensitivity=1.0))
        err, out = checkify.checkify(g, errors=checkify.user_checks)(bad)
        assert str(err.get()).startswith(f"{fn.__name__}: scores must not contain NaN")
        assert int(out) == -1
