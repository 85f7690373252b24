"""One suite for every sampler: jit, vmap, keys, axis, shape, dtype, retracing."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp

RNG = np.random.default_rng(0)
SCORES = jnp.asarray(RNG.normal(size=(3, 7)) * 3)  # no near-ties
VALUES = jnp.asarray(RNG.normal(size=(3, 4)))
CATS = jnp.asarray(RNG.integers(0, 4, size=(3, 9)))
PREDS = jnp.asarray(RNG.integers(0, 2, size=(3, 5, 11)))
LABELS = jnp.asarray(RNG.integers(0, 2, size=(3, 11)))

# name -> (function, positional data, fixed kwargs, integer output?)
REGISTRY = {
    "exponential_gumbel": (
        jaxdp.exponential,
        (SCORES,),
        dict(sensitivity=1.0, method="gumbel"),
        True,
    ),
    "exponential_inverse_cdf": (
        jaxdp.exponential,
        (SCORES,),
        dict(sensitivity=1.0, method="inverse_cdf"),
        True,
    ),
    "exponential_auto": (jaxdp.exponential, (SCORES,), dict(sensitivity=1.0), True),
    "rnm_laplace": (jaxdp.report_noisy_max, (SCORES,), dict(sensitivity=1.0), True),
    "rnm_gumbel": (jaxdp.report_noisy_max, (SCORES,), dict(sensitivity=1.0, noise="gumbel"), True),
    "rnm_exponential": (
        jaxdp.report_noisy_max,
        (SCORES,),
        dict(sensitivity=1.0, noise="exponential"),
        True,
    ),
    "permute_and_flip": (jaxdp.permute_and_flip, (SCORES,), dict(sensitivity=1.0), True),
    "top_k": (jaxdp.top_k, (SCORES, 3), dict(sensitivity=1.0), True),
    # k past _top_k.FLOAT32_ROUNDS: the rounds run in float64
    "top_k_wide": (jaxdp.top_k, (SCORES, 6), dict(sensitivity=1.0), True),
    "laplace": (jaxdp.laplace, (VALUES,), dict(sensitivity=1.0), False),
    "gaussian": (jaxdp.gaussian, (VALUES,), dict(sensitivity=1.0, delta=1e-5), False),
    "randomized_response": (jaxdp.randomized_response, (CATS,), dict(num_categories=4), True),
    "private_mode": (jaxdp.private_mode, (CATS,), dict(num_categories=4), True),
    "select_hypothesis": (jaxdp.select_hypothesis, (PREDS, LABELS), {}, True),
}
SELECTION = [
    "exponential_gumbel",
    "exponential_inverse_cdf",
    "exponential_auto",
    "rnm_laplace",
    "rnm_gumbel",
    "rnm_exponential",
    "permute_and_flip",
    "top_k",
    "top_k_wide",
]


def call(name, key, epsilon=1.0, **overrides):
    fn, data, kwargs, _ = REGISTRY[name]
    return fn(key, *data, epsilon=epsilon, **{**kwargs, **overrides})


def assert_same(a, b, name):
    if REGISTRY[name][3]:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    else:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


params = pytest.mark.parametrize("name", list(REGISTRY))


@params
def test_jit_equals_eager(name):
    key = jax.random.key(0)
    eager = call(name, key)
    jitted = jax.jit(lambda k, e: call(name, k, e))(key, 1.0)
    assert_same(eager, jitted, name)


@params
def test_vmap_over_keys(name):
    keys = jax.random.split(jax.random.key(1), 4)
    batched = jax.vmap(lambda k: call(name, k))(keys)
    for i in range(4):
        assert_same(batched[i], call(name, keys[i]), name)


@params
def test_vmap_over_epsilon(name):
    key = jax.random.key(2)
    eps = jnp.array([0.3, 1.0, 4.0])
    batched = jax.vmap(lambda e: call(name, key, e))(eps)
    for i, e in enumerate([0.3, 1.0, 4.0]):
        assert_same(batched[i], call(name, key, e), name)


@params
def test_typed_and_legacy_keys(name):
    assert_same(call(name, jax.random.PRNGKey(3)), call(name, jax.random.key(3)), name)


@params
def test_same_key_repeats_new_key_differs(name):
    batch = call(name, jax.random.key(0)).shape[: 1 if name.startswith("top_k") else None]
    a = call(name, jax.random.key(4), shape=(50,) + batch)
    b = call(name, jax.random.key(4), shape=(50,) + batch)
    c = call(name, jax.random.key(5), shape=(50,) + batch)
    assert_same(a, b, name)
    assert not np.array_equal(np.asarray(a), np.asarray(c))


@params
def test_dtype(name):
    out = call(name, jax.random.key(6))
    if REGISTRY[name][3]:
        assert out.dtype == jnp.int32
    else:
        assert out.dtype == jnp.float32
    with jax.enable_x64():
        out = call(name, jax.random.key(6))
        if name in ("laplace", "gaussian"):
            # Additive noise keeps the values' dtype (as jax.random samplers do):
            # float32 values stay float32, float64 values give float64.
            assert out.dtype == jnp.float32
            fn, _, kwargs, _ = REGISTRY[name]
            out64 = fn(jax.random.key(6), jnp.asarray(VALUES, jnp.float64), epsilon=1.0, **kwargs)
            assert out64.dtype == jnp.float64
        else:
            assert out.dtype == (jnp.int32 if REGISTRY[name][3] else jnp.float64)


@params
def test_no_retrace_when_epsilon_changes(name):
    @jax.jit
    @functools.partial(chex.assert_max_traces, n=1)
    def f(key, eps):
        return call(name, key, eps)

    for eps in (0.1, 0.5, 2.0, 7.0):
        f(jax.random.key(7), eps)
    chex.clear_trace_counter()


@pytest.mark.parametrize("name", SELECTION)
def test_eager_epsilon_values_share_one_compilation(name):
    """Python-float epsilons are passed traced to the inner jit: one cache entry."""
    call(name, jax.random.key(8), 0.5)
    from jaxdp import _exponential, _noisy_max, _top_k

    impls = [_exponential._exponential_impl, _noisy_max._noisy_max_impl, _top_k._top_k_impl]
    before = [f._cache_size() for f in impls]
    for eps in (0.25, 1.5, 3.0, 9.0):
        call(name, jax.random.key(8), eps)
    assert [f._cache_size() for f in impls] == before


@pytest.mark.parametrize("name", SELECTION)
def test_axis_equals_moveaxis(name):
    fn, data, kwargs, _ = REGISTRY[name]
    scores = jnp.asarray(RNG.normal(size=(4, 7, 5)))
    rest = data[1:]
    key = jax.random.key(9)
    a = fn(key, scores, *rest, epsilon=1.0, axis=1, **kwargs)
    b = fn(key, jnp.moveaxis(scores, 1, -1), *rest, epsilon=1.0, **kwargs)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert a.shape[:2] == (4, 5)


@pytest.mark.parametrize("name", SELECTION)
def test_batched_rows_equal_rows_one_at_a_time(name):
    """With a huge epsilon every mechanism returns each row's argmax (no near-ties)."""
    fn, data, kwargs, _ = REGISTRY[name]
    rest = data[1:]
    key = jax.random.key(10)
    batched = fn(key, SCORES, *rest, epsilon=1e7, **kwargs)
    for b in range(SCORES.shape[0]):
        one = fn(key, SCORES[b], *rest, epsilon=1e7, **kwargs)
        np.testing.assert_array_equal(np.asarray(batched[b]), np.asarray(one))
    top = np.argsort(-np.asarray(SCORES), axis=-1)
    k = data[1] if name.startswith("top_k") else None
    expected = top[:, 0] if k is None else top[:, :k]
    np.testing.assert_array_equal(np.asarray(batched), expected)


@pytest.mark.parametrize("name", SELECTION)
def test_shape_semantics(name):
    extra = (REGISTRY[name][1][1],) if name.startswith("top_k") else ()
    assert call(name, jax.random.key(11)).shape == (3,) + extra
    assert call(name, jax.random.key(11), shape=(5, 3)).shape == (5, 3) + extra
    assert call(name, jax.random.key(11), shape=(2, 5, 3)).shape == (2, 5, 3) + extra
    # a single row broadcasts to any trailing shape
    fn, data, kwargs, _ = REGISTRY[name]
    one = fn(jax.random.key(11), SCORES[:1], *data[1:], epsilon=1.0, shape=(6,), **kwargs)
    assert one.shape == (6,) + extra
    for bad in [(5,), (3, 2), (5, 1)]:
        with pytest.raises(ValueError, match="shape"):
            call(name, jax.random.key(11), shape=bad)


def test_shape_matches_jax_categorical_rules():
    """jaxdp accepts and rejects exactly the shapes jax.random.categorical does."""
    logits = jnp.zeros((3, 7))
    for shape in [(3,), (4, 3), (2, 4, 3), (1,), (3, 1), (4,), ()]:
        try:
            expected = jax.random.categorical(jax.random.key(0), logits, shape=shape).shape
        except ValueError:
            expected = None
        try:
            got = jaxdp.exponential(
                jax.random.key(0), logits, epsilon=1.0, sensitivity=1.0, shape=shape
            ).shape
        except ValueError:
            got = None
        assert got == expected, shape
