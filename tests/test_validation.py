"""Bad input: a ValueError naming the parameter and value; traced values go
through checkify and return the documented sentinel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from laws import assert_matches_law

import jaxdp

KEY = jax.random.key(0)
S = jnp.array([0.0, 1.0, 2.0])
V = jnp.array([0.5, -1.0])

SELECT = {
    "exponential": lambda **kw: jaxdp.exponential(KEY, **{"scores": S, **kw}),
    "report_noisy_max": lambda **kw: jaxdp.report_noisy_max(KEY, **{"scores": S, **kw}),
    "permute_and_flip": lambda **kw: jaxdp.permute_and_flip(KEY, **{"scores": S, **kw}),
    "top_k": lambda **kw: jaxdp.top_k(KEY, kw.pop("scores", S), 2, **kw),
}
ALL_EPS = {
    **{k: (f, dict(sensitivity=1.0)) for k, f in SELECT.items()},
    "exponential_log_probs": (
        lambda **kw: jaxdp.exponential_log_probs(kw.pop("scores", S), **kw),
        dict(sensitivity=1.0),
    ),
    "laplace": (lambda **kw: jaxdp.laplace(KEY, V, **kw), dict(sensitivity=1.0)),
    "gaussian": (lambda **kw: jaxdp.gaussian(KEY, V, **kw), dict(sensitivity=1.0, delta=1e-5)),
    "randomized_response": (
        lambda **kw: jaxdp.randomized_response(KEY, jnp.array([0, 1]), **kw),
        {},
    ),
    "private_mode": (
        lambda **kw: jaxdp.private_mode(KEY, jnp.array([0, 1, 1]), num_categories=2, **kw),
        {},
    ),
    "select_hypothesis": (
        lambda **kw: jaxdp.select_hypothesis(KEY, jnp.ones((2, 3)), jnp.ones(3), **kw),
        {},
    ),
}
BAD_POSITIVE = [0.0, -1.0, float("nan"), float("inf"), -float("inf"), np.array([1.0, 0.0])]


@pytest.mark.parametrize("name", list(ALL_EPS))
@pytest.mark.parametrize("bad", BAD_POSITIVE, ids=repr)
def test_bad_epsilon(name, bad):
    fn, kw = ALL_EPS[name]
    with pytest.raises(ValueError, match=r"epsilon must be finite and > 0, got"):
        fn(epsilon=bad, **kw)


@pytest.mark.parametrize("name", [n for n in ALL_EPS if "sensitivity" in ALL_EPS[n][1]])
@pytest.mark.parametrize("bad", BAD_POSITIVE, ids=repr)
def test_bad_sensitivity(name, bad):
    fn, kw = ALL_EPS[name]
    with pytest.raises(ValueError, match=r"sensitivity must be finite and > 0, got"):
        fn(epsilon=1.0, **{**kw, "sensitivity": bad})


def test_error_names_the_value():
    with pytest.raises(ValueError, match=r"exponential: epsilon must be finite and > 0, got -2.5"):
        jaxdp.exponential(KEY, S, epsilon=-2.5, sensitivity=1.0)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_bad_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        jaxdp.gaussian(KEY, V, epsilon=1.0, delta=bad, sensitivity=1.0)


@pytest.mark.parametrize("name", list(SELECT) + ["exponential_log_probs"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_bad_scores(name, bad):
    fn, kw = ALL_EPS[name]
    with pytest.raises(ValueError, match="scores must not contain NaN or \\+inf"):
        fn(epsilon=1.0, scores=jnp.array([0.0, bad, 1.0]), **kw)


@pytest.mark.parametrize("name", list(SELECT) + ["exponential_log_probs"])
def test_empty_and_all_neg_inf_and_scalar_scores(name):
    fn, kw = ALL_EPS[name]
    with pytest.raises(ValueError, match="empty"):
        fn(epsilon=1.0, scores=jnp.zeros((2, 0)), **kw)
    with pytest.raises(ValueError, match="-inf"):
        fn(epsilon=1.0, scores=jnp.array([[0.0, 1.0, 2.0], [-jnp.inf] * 3]), **kw)
    with pytest.raises(ValueError, match="scores"):
        fn(epsilon=1.0, scores=jnp.array(1.0), **kw)
    with pytest.raises(ValueError, match="scores"):
        fn(epsilon=1.0, scores="abc", **kw)


@pytest.mark.parametrize("name", list(SELECT))
def test_bad_axis_and_shape(name):
    fn = SELECT[name]
    with pytest.raises(ValueError, match="axis"):
        fn(epsilon=1.0, sensitivity=1.0, axis=1)
    with pytest.raises(ValueError, match="shape"):
        fn(epsilon=1.0, sensitivity=1.0, shape=(4, 2), scores=jnp.zeros((3, 5)))
    with pytest.raises(ValueError, match="shape"):
        fn(epsilon=1.0, sensitivity=1.0, shape=(-1,))
    with pytest.raises(ValueError, match="epsilon"):  # epsilon does not broadcast with rows
        fn(epsilon=jnp.ones(4), sensitivity=1.0, scores=jnp.zeros((3, 5)))


def test_unknown_method_and_noise():
    with pytest.raises(ValueError, match="method must be one of"):
        jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, method="alias")
    with pytest.raises(ValueError, match="noise must be one of"):
        jaxdp.report_noisy_max(KEY, S, epsilon=1.0, sensitivity=1.0, noise="gaussian")


def test_top_k_bad_k():
    for k in [0, -1, 4, 2.5, True]:
        with pytest.raises(ValueError, match="k"):
            jaxdp.top_k(KEY, S, k, epsilon=1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="at least k=2 finite"):
        jaxdp.top_k(KEY, jnp.array([0.0, -jnp.inf, -jnp.inf]), 2, epsilon=1.0, sensitivity=1.0)


@pytest.mark.parametrize(
    "bad_key",
    [jax.random.split(KEY, 3), jax.random.split(jax.random.PRNGKey(0), 3), 0, None, jnp.ones(2)],
    ids=["typed_batch", "legacy_batch", "int", "none", "float"],
)
def test_bad_key(bad_key):
    with pytest.raises(ValueError, match="key"):
        jaxdp.exponential(bad_key, S, epsilon=1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="key"):
        jaxdp.laplace(bad_key, V, epsilon=1.0, sensitivity=1.0)


def test_batched_key_points_to_vmap():
    with pytest.raises(ValueError, match="jax.vmap"):
        jaxdp.exponential(jax.random.split(KEY, 2), S, epsilon=1.0, sensitivity=1.0)


def test_categorical_inputs():
    for k in [1, 0, 2.5, "3"]:
        with pytest.raises(ValueError, match="num_categories"):
            jaxdp.randomized_response(KEY, jnp.array([0, 1]), epsilon=1.0, num_categories=k)
        with pytest.raises(ValueError, match="num_categories"):
            jaxdp.private_mode(KEY, jnp.array([0, 1]), epsilon=1.0, num_categories=k)
    for values in [jnp.array([0, 3]), jnp.array([-1, 0]), jnp.array([0.5, 1.0])]:
        with pytest.raises(ValueError, match="values"):
            jaxdp.randomized_response(KEY, values, epsilon=1.0, num_categories=3)
        with pytest.raises(ValueError, match="values"):
            jaxdp.private_mode(KEY, values, epsilon=1.0, num_categories=3)


def test_additive_values():
    for bad in [jnp.array([0.0, jnp.nan]), jnp.array([jnp.inf]), jnp.array([-jnp.inf])]:
        with pytest.raises(ValueError, match="values"):
            jaxdp.laplace(KEY, bad, epsilon=1.0, sensitivity=1.0)
        with pytest.raises(ValueError, match="values"):
            jaxdp.gaussian(KEY, bad, epsilon=1.0, delta=1e-5, sensitivity=1.0)
    with pytest.raises(ValueError, match="shape"):
        jaxdp.laplace(KEY, jnp.zeros(3), epsilon=1.0, sensitivity=1.0, shape=(2,))


def test_select_hypothesis_shapes():
    with pytest.raises(ValueError, match="labels"):
        jaxdp.select_hypothesis(KEY, jnp.ones((2, 3)), jnp.ones(4), epsilon=1.0)
    with pytest.raises(ValueError, match="predictions"):
        jaxdp.select_hypothesis(KEY, jnp.ones(3), jnp.ones(3), epsilon=1.0)
    with pytest.raises(ValueError, match="batch shapes"):
        jaxdp.select_hypothesis(KEY, jnp.ones((2, 2, 3)), jnp.ones((3, 3)), epsilon=1.0)
    with pytest.raises(ValueError, match="H = 0"):
        jaxdp.select_hypothesis(KEY, jnp.ones((0, 3)), jnp.ones(3), epsilon=1.0)
    # no examples is data, not an error: every hypothesis has 0 errors, a uniform draw
    draws = jaxdp.select_hypothesis(
        KEY, jnp.ones((3, 0)), jnp.ones(0), epsilon=1.0, shape=(30_000,)
    )
    assert_matches_law(draws, np.full(3, 1 / 3))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, np.array([0.4, 0.3, 0.3]))


def test_empty_categorical_data_draw_uniformly():
    # an empty dataset never raises (it is every one-record dataset's neighbour)
    for shape in ((0,), (2, 0)):
        out = jaxdp.private_mode(KEY, jnp.zeros(shape, jnp.int32), epsilon=1.0, num_categories=3)
        assert out.shape == shape[:-1]
    draws = jaxdp.private_mode(
        KEY, jnp.zeros((0,), jnp.int32), epsilon=1.0, num_categories=3, shape=(30_000,)
    )
    assert_matches_law(draws, np.full(3, 1 / 3))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, np.array([0.4, 0.3, 0.3]))


# ----------------------------------------------------------------------------- traced


def test_concrete_checks_still_run_inside_a_callers_jit():
    """Concrete scores closed over inside a user's jit are still checked."""
    scores = jnp.array([0.0, jnp.nan])
    with pytest.raises(ValueError, match="scores must not contain"):
        jax.jit(lambda e: jaxdp.exponential(KEY, scores, epsilon=e, sensitivity=1.0))(1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        jax.jit(lambda e: jaxdp.exponential(KEY, S, epsilon=e, sensitivity=-1.0))(1.0)


@pytest.mark.parametrize("name", list(SELECT))
@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf")])
def test_traced_bad_epsilon_returns_minus_one_and_checkify_reports(name, bad):
    f = jax.jit(
        lambda e: SELECT[name](epsilon=e, sensitivity=1.0, shape=(4,) if name != "top_k" else (4,))
    )
    out = np.asarray(f(bad))
    assert np.all(out == -1)
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(bad)
    assert "epsilon must be finite and > 0" in str(err.get())
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(1.0)
    assert err.get() is None


@pytest.mark.parametrize("name", list(SELECT))
def test_traced_bad_scores_return_minus_one_per_row(name):
    scores = jnp.array([[0.0, 1.0, 2.0], [0.0, jnp.nan, 1.0], [-jnp.inf] * 3, [jnp.inf, 0, 0]])
    f = jax.jit(lambda s: SELECT[name](epsilon=1.0, sensitivity=1.0, scores=s))
    out = np.asarray(f(scores))
    assert np.all(out[0] >= 0)
    assert np.all(out[1:] == -1)
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(scores)
    assert err.get() is not None


@pytest.mark.parametrize(("n", "draws"), [(3, 1), (3, 500), (700, 1), (700, 50)])
def test_traced_bad_rows_inverse_cdf_paths(n, draws):
    """Both inverse-CDF layouts (block search: one draw per row; guide table:
    many) flag invalid rows from their row totals, with no separate pass."""
    scores = np.tile(np.linspace(0.0, 2.0, n), (4, 1))
    scores[1, n // 2] = np.nan
    scores[2] = -np.inf
    scores[3, n - 1] = np.inf
    shape = (draws, 4) if draws > 1 else (4,)
    f = jax.jit(
        lambda s: jaxdp.exponential(
            KEY, s, epsilon=1.0, sensitivity=1.0, shape=shape, method="inverse_cdf"
        )
    )
    out = np.asarray(f(jnp.asarray(scores))).reshape(-1, 4)
    assert np.all(out[:, 0] >= 0) and np.all(out[:, 0] < n)
    assert np.all(out[:, 1:] == -1)


def test_traced_bad_parameters_in_other_mechanisms():
    f = jax.jit(lambda e: jaxdp.laplace(KEY, V, epsilon=e, sensitivity=1.0))
    assert np.all(np.isnan(f(-1.0)))
    err, _ = checkify.checkify(f, errors=checkify.user_checks)(-1.0)
    assert "epsilon" in str(err.get())
    g = jax.jit(lambda d: jaxdp.gaussian(KEY, V, epsilon=1.0, delta=d, sensitivity=1.0))
    assert np.all(np.isnan(g(2.0)))
    err, _ = checkify.checkify(g, errors=checkify.user_checks)(2.0)
    assert "delta" in str(err.get())
    h = jax.jit(lambda v: jaxdp.randomized_response(KEY, v, epsilon=1.0, num_categories=2))
    np.testing.assert_array_equal(h(jnp.array([0, 5])) == -1, [False, True])
    lp = jax.jit(lambda e: jaxdp.exponential_log_probs(S, epsilon=e, sensitivity=1.0))(0.0)
    assert np.all(np.isnan(lp))


# ----------------------------------------------------------------------------- finding 7

from jaxdp import _checks  # noqa: E402


@pytest.mark.parametrize("name", list(ALL_EPS))
@pytest.mark.parametrize("bad", [1e39, 1e-300, 1e-40], ids=repr)
def test_epsilon_must_fit_the_compute_dtype(name, bad):
    # finite and > 0 in float64, but inf / 0 / subnormal in float32
    fn, kw = ALL_EPS[name]
    with pytest.raises(ValueError, match=r"epsilon must be finite and > 0 in float32.*got"):
        fn(epsilon=bad, **kw)


def test_delta_must_fit_the_compute_dtype():
    with pytest.raises(ValueError, match=r"delta must be in the open interval \(0, 1\) in float32"):
        jaxdp.gaussian(KEY, V, epsilon=1.0, delta=1e-300, sensitivity=1.0)
    with pytest.raises(ValueError, match=r"sensitivity .* in float32"):
        jaxdp.laplace(KEY, V, epsilon=1.0, sensitivity=1e39)
    with jax.enable_x64():  # fine in float64
        assert np.all(np.isfinite(jaxdp.laplace(KEY, V, epsilon=1e-300, sensitivity=1e-300)))


@pytest.mark.parametrize("good", [True, False, np.bool_(True), np.array(False)])
def test_boolean_accepts_real_booleans(good):
    assert _checks.boolean(good, "f", "flag") is bool(good)


@pytest.mark.parametrize(
    "bad", ["False", "True", "", 0, 1, 1.0, None, np.array([True]), jnp.array(1)], ids=repr
)
def test_boolean_rejects_everything_else(bad):
    with pytest.raises(ValueError, match=r"f: flag must be a bool \(True or False\), got"):
        _checks.boolean(bad, "f", "flag")


def test_boolean_rejects_tracers():
    with pytest.raises(ValueError, match="must be a bool"):
        jax.jit(lambda b: _checks.boolean(b, "f", "flag"))(True)


# ----------------------------------------------------------------------------- audit, stop 39


def test_noise_scale_must_fit_the_compute_dtype():
    # eps and sensitivity are each fine; their ratio overflows or vanishes in float32
    for eps, sens in ((1e-30, 1e30), (1e30, 1e-30)):
        with pytest.raises(ValueError, match=r"laplace: the noise scale sensitivity / epsilon"):
            jaxdp.laplace(KEY, jnp.zeros(2), epsilon=eps, sensitivity=sens)
    with pytest.raises(ValueError, match="gaussian: the noise standard deviation sigma = inf"):
        jaxdp.gaussian(KEY, jnp.zeros(2), epsilon=1.0, delta=1e-5, sensitivity=3e38)
    checked = checkify.checkify(
        jax.jit(lambda e, s: jaxdp.laplace(KEY, jnp.zeros(2), epsilon=e, sensitivity=s)),
        errors=checkify.user_checks,
    )
    err, out = checked(1e30, 1e-30)
    assert "overflows or vanishes" in str(err.get()) and np.all(np.isnan(out))
    err, out = checked(1.0, 1.0)
    assert err.get() is None and np.all(np.isfinite(out))


def test_empty_pytrees_map_to_themselves():
    assert jaxdp.laplace(KEY, {}, epsilon=1.0, sensitivity=1.0) == {}
    assert jaxdp.gaussian(KEY, {}, epsilon=1.0, delta=1e-5, sensitivity=1.0) == {}
    assert jaxdp.laplace(KEY, [], epsilon=1.0, sensitivity=1.0).shape == (0,)


def test_bools_are_not_numbers_axes_or_dims():
    scores = jnp.zeros((2, 3))
    for kw in (
        dict(epsilon=np.array([True, True])),
        dict(epsilon=jnp.array(True)),
        dict(sensitivity=jnp.array(True)),
        dict(axis=True),
        dict(shape=(True,)),
    ):
        args = dict(epsilon=1.0, sensitivity=1.0) | kw
        with pytest.raises(ValueError, match="epsilon|sensitivity|axis|shape"):
            jaxdp.exponential(KEY, scores, **args)
    # flags accept NumPy bools everywhere, joint_top_k included
    a = jaxdp.joint_top_k(KEY, jnp.arange(5.0), 2, epsilon=1.0, sensitivity=1.0, monotonic=np.True_)
    b = jaxdp.joint_top_k(KEY, jnp.arange(5.0), 2, epsilon=1.0, sensitivity=1.0, monotonic=True)
    np.testing.assert_array_equal(a, b)


def test_too_many_categories_is_a_value_error():
    for fn in (jaxdp.randomized_response, jaxdp.private_mode):
        with pytest.raises(ValueError, match=r"num_categories must be an int <= 2147483647"):
            fn(KEY, jnp.zeros(3, jnp.int32), epsilon=1.0, num_categories=2**31)


def test_top_k_traced_too_few_finite_scores_reported():
    checked = checkify.checkify(
        jax.jit(lambda s: jaxdp.top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0)),
        errors=checkify.user_checks,
    )
    err, _ = checked(jnp.array([-jnp.inf, 0.0, -jnp.inf]))
    assert "at least k=2 finite scores" in str(err.get())
    err, _ = checked(jnp.array([-jnp.inf, 0.0, 1.0]))
    assert err.get() is None
