"""Property-based fuzzing of every public sampler with hypothesis.

Properties: never NaN; indices always in range; never an outcome whose score is
-inf; the same properties under ``jax.jit`` with traced data; and invalid input
raises ``ValueError`` and no other exception.

CI runs a bounded, derandomised profile; ``JAXDP_FUZZ=long`` runs a long
randomised one::

    JAXDP_FUZZ=long JAX_PLATFORMS=cpu python -m pytest tests/test_fuzz.py

Shapes are drawn from a small set so that jit compilations are reused.
"""

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxdp

LONG = os.environ.get("JAXDP_FUZZ", "") == "long"
PROFILE = settings(
    max_examples=1000 if LONG else 12,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

DTYPES = ["float16", "bfloat16", "float32", "float64", "int32"]
KEY = jax.random.key(0)

# ----------------------------------------------------------------------------- strategies

positive = st.floats(min_value=-6.0, max_value=6.0).map(lambda e: 10.0**e)


@st.composite
def magnitudes(draw, size):
    """float64 values from subnormal (1e-45) to 1e30, both signs, some zeros and -inf."""
    out = np.empty(size)
    for i in range(size):
        kind = draw(st.sampled_from(["big", "small", "zero", "moderate", "neginf"]))
        sign = draw(st.sampled_from([-1.0, 1.0]))
        if kind == "big":
            out[i] = sign * 10.0 ** draw(st.floats(10, 30))
        elif kind == "small":
            out[i] = sign * 10.0 ** draw(st.floats(-45, -30))
        elif kind == "zero":
            out[i] = 0.0
        elif kind == "moderate":
            out[i] = draw(st.floats(-100, 100))
        else:
            out[i] = -np.inf
    return out


def cast(values: np.ndarray, dtype: str) -> jax.Array:
    if dtype == "int32":
        finite = np.where(np.isfinite(values), values, -(2.0**31))
        return jnp.asarray(np.clip(np.round(finite), -(2**31), 2**31 - 1).astype(np.int32))
    with np.errstate(over="ignore"):
        return jnp.asarray(values, dtype)


def x64(dtype):
    return jax.enable_x64(dtype == "float64")


SELECTORS = {
    "exponential_gumbel": functools.partial(jaxdp.exponential, method="gumbel"),
    "exponential_inverse_cdf": functools.partial(jaxdp.exponential, method="inverse_cdf"),
    "report_noisy_max_laplace": jaxdp.report_noisy_max,
    "report_noisy_max_exponential": functools.partial(jaxdp.report_noisy_max, noise="exponential"),
    "permute_and_flip": jaxdp.permute_and_flip,
    "top_k": functools.partial(jaxdp.top_k, k=1),
}


@st.composite
def selection_case(draw):
    n = draw(st.sampled_from([1, 5]))
    batch = draw(st.sampled_from([(), (3,)]))
    axis = draw(st.sampled_from([-1, 0])) if batch else -1
    lead = draw(st.sampled_from([None, (4,)]))
    dtype = draw(st.sampled_from(DTYPES))
    values = draw(magnitudes(n * math.prod(batch))).reshape(batch + (n,))
    if axis == 0:
        values = np.moveaxis(values, -1, 0)
    return dict(
        name=draw(st.sampled_from(sorted(SELECTORS))),
        values=values,
        dtype=dtype,
        axis=axis,
        shape=None if lead is None else lead + batch,
        epsilon=draw(positive),
        sensitivity=draw(positive),
        monotonic=draw(st.booleans()),
    )


def check_selection(out, scores, axis, shape, top_k):
    out = np.asarray(out)
    scores = np.moveaxis(np.asarray(scores, np.float64), axis, -1)
    batch = scores.shape[:-1]
    expected = (shape if shape is not None else batch) + ((1,) if top_k else ())
    assert out.shape == expected and out.dtype == np.int32
    n = scores.shape[-1]
    assert np.all((out >= 0) & (out < n)), out
    idx = out[..., 0] if top_k else out
    rows = np.broadcast_to(scores, idx.shape + (n,))
    picked = np.take_along_axis(rows, idx[..., None], axis=-1)
    assert np.all(picked > -np.inf), "selected an outcome whose score is -inf"


@PROFILE
@given(case=selection_case())
def test_selection_fuzz(case):
    fn = SELECTORS[case["name"]]
    kw = dict(epsilon=case["epsilon"], sensitivity=case["sensitivity"])
    kw |= dict(monotonic=case["monotonic"], shape=case["shape"], axis=case["axis"])
    with x64(case["dtype"]):
        scores = cast(case["values"], case["dtype"])
        host = np.moveaxis(np.asarray(scores, np.float64), case["axis"], -1)
        invalid = np.any(np.isnan(host) | (host == np.inf)) or np.any(
            np.all(host == -np.inf, axis=-1)
        )
        if invalid:
            with pytest.raises(ValueError):
                fn(KEY, scores, **kw)
            return
        out = fn(KEY, scores, **kw)
        check_selection(out, scores, case["axis"], case["shape"], case["name"] == "top_k")
        jitted = jax.jit(lambda k, s: fn(k, s, **kw))(KEY, scores)
        check_selection(jitted, scores, case["axis"], case["shape"], case["name"] == "top_k")


@pytest.mark.filterwarnings("ignore::jaxdp._additive.PrecisionWarning")  # huge values: by design
@PROFILE
@given(
    dtype=st.sampled_from(DTYPES),
    values=magnitudes(3),
    epsilon=positive,
    sensitivity=positive,
    which=st.sampled_from(["laplace", "gaussian", "granular"]),
    delta=st.floats(-10, -0.5).map(lambda e: 10.0**e),
    lead=st.sampled_from([None, (2, 3)]),
)
def test_additive_fuzz(dtype, values, epsilon, sensitivity, which, delta, lead):
    values = np.where(np.isneginf(values), 1.0, values)
    kw = dict(epsilon=epsilon, sensitivity=sensitivity, shape=lead)
    if which == "gaussian":
        fn = functools.partial(jaxdp.gaussian, delta=delta)
    elif which == "granular":
        fn = functools.partial(jaxdp.laplace, granularity=2.0 ** round(math.log2(sensitivity)))
    else:
        fn = jaxdp.laplace
    with x64(dtype):
        x = cast(values, dtype)
        if not np.all(np.isfinite(np.asarray(x, np.float64))):
            with pytest.raises(ValueError):
                fn(KEY, x, **kw)
            return
        try:
            out = fn(KEY, x, **kw)
        except ValueError as err:
            # the one documented refusal, an argument: the granularity limit (values are
            # data and never raise, however large: then a PrecisionWarning)
            assert which == "granular" and "too fine" in str(err)
            return
        out = np.asarray(out, np.float64)
        assert out.shape == (lead if lead else (3,))
        assert not np.any(np.isnan(out)), out
        jitted = np.asarray(jax.jit(lambda k, v: fn(k, v, **kw))(KEY, x), np.float64)
        assert not np.any(np.isnan(jitted))


@PROFILE
@given(
    k=st.sampled_from([2, 5]),
    data=st.sampled_from([1, 6]).flatmap(
        lambda m: st.lists(st.integers(0, 4), min_size=m, max_size=m)
    ),
    epsilon=positive,
    lead=st.sampled_from([None, (7,)]),
)
def test_categorical_fuzz(k, data, epsilon, lead):
    values = jnp.asarray(np.minimum(data, k - 1), jnp.int32)
    rr_shape = None if lead is None else lead + values.shape
    rr = jaxdp.randomized_response(KEY, values, epsilon=epsilon, num_categories=k, shape=rr_shape)
    mode = jaxdp.private_mode(KEY, values, epsilon=epsilon, num_categories=k, shape=lead)
    for out in (rr, mode):
        out = np.asarray(out)
        assert out.dtype == np.int32 and np.all((out >= 0) & (out < k))


CONTINUOUS = {
    "private_quantile": lambda k, x, e: jaxdp.private_quantile(
        k, x, 0.3, epsilon=e, bounds=(-1e3, 1e3), shape=(16,)
    ),
    "private_price": lambda k, x, e: jaxdp.private_price(
        k, jnp.abs(x), epsilon=e, bounds=(0.0, 100.0), shape=(16,)
    ),
    "exponential_piecewise": lambda k, x, e: jaxdp.exponential_piecewise(
        k,
        jnp.array([-1.0, 0.0, 2.0, 5.0]),
        x[:3],
        x[3:6] / 1e3,
        epsilon=e,
        sensitivity=1.0,
        shape=(16,),
    ),  # fmt: skip
}
RANGES = {
    "private_quantile": (-1e3, 1e3),
    "private_price": (0.0, 100.0),
    "exponential_piecewise": (-1.0, 5.0),
}


@PROFILE
@given(
    name=st.sampled_from(sorted(CONTINUOUS)),
    values=magnitudes(6),
    epsilon=positive,
    dtype=st.sampled_from(["float32", "float64"] if LONG else ["float32"]),
)
def test_continuous_fuzz(name, values, epsilon, dtype):
    values = np.where(np.isneginf(values), -5.0, values)
    values = np.clip(values, -1e4, 1e4) if name == "exponential_piecewise" else values
    fn = CONTINUOUS[name]
    with x64(dtype):
        x = cast(values, dtype)
        # bids outside the range are data: clipped, never an error (DESIGN.md)
        out = np.asarray(fn(KEY, x, epsilon), np.float64)
        lo, hi = RANGES[name]
        assert not np.any(np.isnan(out))
        assert np.all((out >= lo) & (out <= hi)), (out.min(), out.max())


# ----------------------------------------------------------------------------- invalid input

S = jnp.array([[0.0, 1.0, 2.0], [3.0, 1.0, -jnp.inf]])
BAD_NUMBERS = [0.0, -1.0, math.nan, math.inf, -math.inf, "one", None, [], [1.0, -1.0]]

INVALID = {
    "epsilon": lambda bad: jaxdp.exponential(KEY, S, epsilon=bad, sensitivity=1.0),
    "sensitivity": lambda bad: jaxdp.report_noisy_max(KEY, S, epsilon=1.0, sensitivity=bad),
    "pf_epsilon": lambda bad: jaxdp.permute_and_flip(KEY, S, epsilon=bad, sensitivity=1.0),
    "top_k_sensitivity": lambda bad: jaxdp.top_k(KEY, S, 2, epsilon=1.0, sensitivity=bad),
    "laplace_epsilon": lambda bad: jaxdp.laplace(KEY, S[0], epsilon=bad, sensitivity=1.0),
    "gaussian_delta": lambda bad: jaxdp.gaussian(
        KEY, S[0], epsilon=1.0, delta=bad if bad != -1.0 else 1.0, sensitivity=1.0
    ),
    "rr_epsilon": lambda bad: jaxdp.randomized_response(KEY, jnp.array([0, 1]), epsilon=bad),
    "mode_epsilon": lambda bad: jaxdp.private_mode(
        KEY, jnp.array([0, 1]), epsilon=bad, num_categories=2
    ),
    "learner_epsilon": lambda bad: jaxdp.select_hypothesis(
        KEY, jnp.zeros((2, 3)), jnp.zeros(3), epsilon=bad
    ),
    "log_probs_epsilon": lambda bad: jaxdp.exponential_log_probs(S, epsilon=bad, sensitivity=1.0),
}

STRUCTURAL = [
    lambda: jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, axis=2),
    lambda: jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, axis=1.5),
    lambda: jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, shape=(3,)),
    lambda: jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, shape=(-1, 2)),
    lambda: jaxdp.exponential(KEY, S, epsilon=1.0, sensitivity=1.0, method="nope"),
    lambda: jaxdp.exponential(KEY, jnp.zeros((2, 0)), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, jnp.array(1.0), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, jnp.array([jnp.nan, 1.0]), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, jnp.array([jnp.inf, 1.0]), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, jnp.full(3, -jnp.inf), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, "scores", epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, jnp.array([1 + 1j]), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(0, S, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(None, S, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(jax.random.split(KEY), S, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.exponential(KEY, S, epsilon=jnp.ones(5), sensitivity=1.0),
    lambda: jaxdp.report_noisy_max(KEY, S, epsilon=1.0, sensitivity=1.0, noise="cauchy"),
    lambda: jaxdp.top_k(KEY, S, 4, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.top_k(KEY, S, 3, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.top_k(KEY, S, 0, epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.laplace(KEY, jnp.array([jnp.nan]), epsilon=1.0, sensitivity=1.0),
    lambda: jaxdp.laplace(KEY, S[0], epsilon=1.0, sensitivity=1.0, granularity=0.3),
    lambda: jaxdp.randomized_response(KEY, jnp.array([0, 2]), epsilon=1.0),
    lambda: jaxdp.randomized_response(KEY, jnp.array([0.5]), epsilon=1.0),
    lambda: jaxdp.randomized_response(KEY, jnp.array([0]), epsilon=1.0, num_categories=1),
    lambda: jaxdp.private_mode(KEY, jnp.array([0, 3]), epsilon=1.0, num_categories=3),
    lambda: jaxdp.select_hypothesis(KEY, jnp.zeros(3), jnp.zeros(3), epsilon=1.0),
    lambda: jaxdp.select_hypothesis(KEY, jnp.zeros((2, 3)), jnp.zeros(4), epsilon=1.0),
]


@PROFILE
@given(which=st.sampled_from(sorted(INVALID)), bad=st.sampled_from(BAD_NUMBERS))
def test_invalid_numbers_raise_value_error(which, bad):
    with pytest.raises(ValueError):
        INVALID[which](bad)


@pytest.mark.parametrize("index", range(len(STRUCTURAL)))
def test_invalid_structure_raises_value_error(index):
    with pytest.raises(ValueError):
        STRUCTURAL[index]()
