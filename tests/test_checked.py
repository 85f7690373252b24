"""jaxdp.checked: a failed check on a traced argument raises; good input is unchanged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxdp

KEY = jax.random.key(0)
SCORES = jnp.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])


def _exponential(epsilon):
    return jaxdp.exponential(KEY, SCORES, epsilon=epsilon, sensitivity=1.0, shape=(50, 2))


def _laplace(values):
    return jaxdp.laplace(KEY, values, epsilon=1.0, sensitivity=1.0)


def _mode(values):
    return jaxdp.private_mode(KEY, values, epsilon=1.0, num_categories=3, shape=(20,))


def test_traced_bad_epsilon_raises_under_jit():
    f = jax.jit(_exponential)
    assert np.all(np.asarray(f(-1.0)) == -1)  # unchecked: the sentinel
    with pytest.raises(checkify.JaxRuntimeError, match="exponential: epsilon must be finite"):
        jaxdp.checked(f)(-1.0)
    with pytest.raises(ValueError, match="got -1.0"):  # JaxRuntimeError is a ValueError
        jaxdp.checked(f)(jnp.float32(-1.0))
    with pytest.raises(ValueError, match="epsilon must be finite"):
        jaxdp.checked(f)(jnp.nan)


def test_nan_value_in_laplace_raises():
    values = jnp.array([1.0, jnp.nan, 3.0])
    f = jax.jit(_laplace)
    assert np.isnan(np.asarray(f(values))[1])
    with pytest.raises(ValueError, match="laplace: values must be finite"):
        jaxdp.checked(f)(values)


def test_out_of_range_category_in_private_mode_raises_under_jit():
    values = jnp.array([0, 2, 2, 5])
    f = jax.jit(_mode)
    assert np.all(np.asarray(f(values)) == -1)
    message = r"private_mode: values must be categories in \[0, num_categories=3\)"
    with pytest.raises(ValueError, match=message):
        jaxdp.checked(f)(values)


@pytest.mark.parametrize(
    "fn,arg",
    [
        (_exponential, 1.0),
        (_laplace, jnp.array([1.0, 2.0, 3.0])),
        (_mode, jnp.array([0, 2, 2, 1])),
    ],
)
def test_good_input_gives_the_unchecked_output(fn, arg):
    expected = jax.jit(fn)(arg)
    np.testing.assert_array_equal(jaxdp.checked(jax.jit(fn))(arg), expected)
    np.testing.assert_array_equal(jaxdp.checked(fn)(arg), fn(arg))


def test_vmap_inside_checked_reports_the_bad_row():
    f = jax.vmap(_exponential)
    eps = jnp.array([1.0, -2.0, 0.5])
    with pytest.raises(ValueError, match="got -2.0"):
        jaxdp.checked(f)(eps)
    good = jnp.array([1.0, 2.0, 0.5])
    np.testing.assert_array_equal(jaxdp.checked(f)(good), f(good))


def test_concrete_bad_argument_still_raises_jaxdps_value_error():
    with pytest.raises(ValueError, match="exponential: epsilon must be finite and > 0"):
        jaxdp.checked(lambda: _exponential(-1.0))()


def test_keyword_arguments_and_pytree_outputs():
    def f(values, *, epsilon):
        return {"noisy": jaxdp.laplace(KEY, values, epsilon=epsilon, sensitivity=1.0)}

    out = jaxdp.checked(f)(jnp.zeros(3), epsilon=2.0)
    np.testing.assert_array_equal(out["noisy"], f(jnp.zeros(3), epsilon=2.0)["noisy"])


def test_callers_own_checks_are_reported():
    def f(x):
        checkify.check(jnp.all(x > 0), "x must be positive")
        return x

    with pytest.raises(ValueError, match="x must be positive"):
        jaxdp.checked(jax.jit(f))(jnp.array([-1.0]))


def test_wraps_keeps_the_name_and_doc():
    def my_study(epsilon):
        """Docs."""
        return _exponential(epsilon)

    wrapped = jaxdp.checked(my_study)
    assert wrapped.__name__ == "my_study"
    assert wrapped.__doc__ == "Docs."


@pytest.mark.parametrize("outer", [jax.jit, jax.vmap])
def test_checked_inside_a_transformation_is_a_clear_type_error(outer):
    with pytest.raises(TypeError, match=r"jaxdp.checked\(jax.jit\(f\)\)"):
        outer(jaxdp.checked(_exponential))(jnp.array([1.0, 2.0]))


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        jaxdp.checked(3)
