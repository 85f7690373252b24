"""Tests of exact continuous sampling: exponential_piecewise, private_price,
private_quantile, and the documented grid path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.experimental import checkify

import jaxdp

KEY = jax.random.key(0)
DRAWS = 200_000
ALPHA = 1e-3


# ----------------------------------------------------------------------------- exact laws


def _log_masses(edges, intercepts, slopes, factor):
    """log of int_a^b exp(factor * (c + m r)) dr per interval, NumPy float64."""
    e = np.asarray(edges, np.float64)
    c = np.asarray(intercepts, np.float64)
    m = np.asarray(slopes, np.float64)
    a, b = e[:-1], e[1:]  # consecutive edges; or a (2, k) stack of left/right ends
    if e.ndim == 2:
        a, b = e[0], e[1]
    w = b - a
    alpha = factor * m
    with np.errstate(divide="ignore", invalid="ignore"):
        left = factor * (c + m * a)
        right = factor * (c + m * b)
        hi = np.maximum(left, right)
        y = np.abs(alpha) * w
        # exp(hi) * w * (1 - exp(-y)) / y, with the y -> 0 limit w * exp(hi)
        shape_term = np.where(y > 0, np.log(-np.expm1(-y)) - np.log(np.where(y > 0, y, 1)), 0.0)
        out = hi + np.log(w) + shape_term
    return np.where((w > 0) & np.isfinite(c), out, -np.inf)


def piecewise_cdf(edges, intercepts, slopes, factor):
    """The exact CDF of density ∝ exp(factor * u(r)), float64, as a callable."""
    e = np.asarray(edges, np.float64)
    c = np.asarray(intercepts, np.float64)
    m = np.asarray(slopes, np.float64)
    logm = _log_masses(e, c, m, factor)
    top = logm.max()
    mass = np.exp(logm - top)
    total = mass.sum()
    before = np.concatenate([[0.0], np.cumsum(mass)])

    def cdf(x):
        x = np.clip(np.asarray(x, np.float64), e[0], e[-1])
        j = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(m) - 1)
        part = _log_masses(np.stack([e[j], x]), c[j], m[j], factor)
        return (before[j] + np.exp(part - top)) / total

    return cdf


def piecewise_constant_cdf(edges, log_weights):
    """CDF of the density ∝ exp(log_weights[j]) on [edges[j], edges[j+1])."""
    e = np.asarray(edges, np.float64)
    w = np.diff(e)
    lw = np.asarray(log_weights, np.float64)
    with np.errstate(divide="ignore"):
        logm = np.where(w > 0, lw + np.log(w), -np.inf)
    mass = np.exp(logm - logm.max())
    total = mass.sum()
    before = np.concatenate([[0.0], np.cumsum(mass)])
    density = np.where(w > 0, mass / np.where(w > 0, w, 1), 0.0)

    def cdf(x):
        x = np.clip(np.asarray(x, np.float64), e[0], e[-1])
        j = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(w) - 1)
        return (before[j] + density[j] * (x - e[j])) / total

    return cdf


def assert_ks(draws, cdf, alpha=ALPHA):
    x = np.asarray(draws, np.float64).ravel()
    assert np.all(np.isfinite(x)), "NaN or inf draw"
    pvalue = scipy.stats.kstest(x, cdf).pvalue
    assert pvalue > alpha, pvalue


def price_cdf(bids, lo, hi, epsilon):
    b = np.sort(np.asarray(bids, np.float64))
    n = len(b)
    edges = np.concatenate([[lo], b, [hi]])
    count = n - np.arange(n + 1)
    return piecewise_cdf(edges, np.zeros(n + 1), count, epsilon / (2 * hi))


def quantile_cdf(data, q, lo, hi, epsilon):
    x = np.sort(np.clip(np.asarray(data, np.float64), lo, hi))
    n = len(x)
    edges = np.concatenate([[lo], x, [hi]])
    utility = -np.abs(np.arange(n + 1) - q * n)
    # add/remove sensitivity max(q, 1 - q) (tight; Smith's utility)
    return piecewise_constant_cdf(edges, epsilon / (2 * max(q, 1 - q)) * utility)


# ----------------------------------------------------------------------------- piecewise

PIECES = {
    # mixed slopes, a zero-width interval, and a slope of 1e-7 (near 0)
    "mixed": ([0.0, 1.0, 3.0, 3.0, 4.0], [0.0, 2.0, 5.0, -1.0], [1.0, -1.0, 0.0, 1e-7], 2.0),
    # slopes near 0 of both signs, and exactly 0
    "tiny_slopes": ([-1.0, 0.0, 0.5, 2.0], [0.0, 1.0, 0.0], [1e-30, -1e-6, 0.0], 2.0),
    # steep slopes both ways (mass concentrated at interval ends) and a -inf
    # intercept: that interval is never drawn
    "steep_excluded": (
        [0.0, 1.0, 2.0, 3.0, 4.0],
        [0.0, 40.0, -np.inf, 0.5],
        [30.0, -30.0, 0.0, -1.0],
        1.0,
    ),
}


@pytest.mark.parametrize("name", sorted(PIECES))
def test_piecewise_matches_exact_cdf(name):
    edges, c, m, eps = PIECES[name]
    draws = jaxdp.exponential_piecewise(
        KEY,
        jnp.array(edges),
        jnp.array(c),
        jnp.array(m),
        epsilon=eps,
        sensitivity=1.0,
        shape=(DRAWS,),
    )
    assert draws.shape == (DRAWS,) and draws.dtype == jnp.float32
    assert_ks(draws, piecewise_cdf(edges, c, m, eps / 2))
    with pytest.raises(AssertionError):
        assert_ks(draws, piecewise_cdf(edges, c, m, 0.8 * eps / 2))


def test_piecewise_tiny_slopes_wrong_law_is_caught():
    # the near-zero slopes do matter where they are not negligible: a wrong slope fails
    edges, c, m, eps = PIECES["tiny_slopes"]
    draws = jaxdp.exponential_piecewise(
        KEY,
        jnp.array(edges),
        jnp.array(c),
        jnp.array(m),
        epsilon=eps,
        sensitivity=1.0,
        shape=(DRAWS,),
    )
    with pytest.raises(AssertionError):
        assert_ks(draws, piecewise_cdf(edges, [0.0, 1.1, 0.0], m, eps / 2))


def test_piecewise_masses_from_1e_minus_300_to_1e300():
    # log-masses from about -690 to +690: naive exp over- and underflows even in float64
    edges = [0.0, 1.0, 2.0, 3.0, 4.0]
    factor = 0.5
    c = np.array([-690.0, 690.0, 689.0, 0.0]) / factor
    m = np.array([0.0, 0.0, 1.0, 0.0])
    draws = jaxdp.exponential_piecewise(
        KEY,
        jnp.array(edges),
        jnp.array(c),
        jnp.array(m),
        epsilon=1.0,
        sensitivity=1.0,
        shape=(DRAWS,),
    )
    assert_ks(draws, piecewise_cdf(edges, c, m, factor))
    with pytest.raises(AssertionError):
        assert_ks(draws, piecewise_cdf(edges, c, np.zeros(4), factor))


def test_piecewise_scale_overflowing_float32_keeps_flat_intervals():
    """epsilon / sensitivity = 6e38 overflows float32: the scale is clamped to the
    largest float (the shared scores-to-logits transform), as the exact scale acts,
    so the flat top interval [1, 3) keeps all the mass (it was NaN: inf * 0)."""
    draws = jaxdp.exponential_piecewise(
        KEY,
        jnp.array([0.0, 1.0, 3.0]),
        jnp.array([0.0, 2.0]),
        jnp.array([0.0, 0.0]),
        epsilon=3e38,
        sensitivity=0.5,
        monotonic=True,
        shape=(20_000,),
    )
    draws = np.asarray(draws, np.float64)
    assert np.all((draws >= 1.0) & (draws <= 3.0))
    assert_ks(draws, scipy.stats.uniform(1.0, 2.0).cdf)


def test_piecewise_huge_epsilon_and_steep_slopes_stay_finite():
    edges = jnp.array([0.0, 1.0, 2.0])
    draws = jaxdp.exponential_piecewise(
        KEY,
        edges,
        jnp.array([0.0, 2.0]),
        jnp.array([1.0, -1.0]),
        epsilon=1e30,
        sensitivity=1.0,
        shape=(1000,),
    )
    assert np.all(np.isfinite(draws))
    np.testing.assert_allclose(draws, 1.0, atol=1e-6)  # all mass at the peak r = 1
    steep = jaxdp.exponential_piecewise(
        KEY,
        edges,
        jnp.array([0.0, 0.0]),
        jnp.array([1e30, 0.0]),
        epsilon=1e6,
        sensitivity=1.0,
        shape=(1000,),
    )
    np.testing.assert_allclose(steep, 1.0, atol=1e-6)
    # exponential tail of rate k * slope below the peak, exact in law
    k_slope = 1e4 * 3.0 / 2
    gaps = 1.0 - np.asarray(
        jaxdp.exponential_piecewise(
            KEY,
            jnp.array([0.0, 1.0]),
            jnp.array([0.0]),
            jnp.array([3.0]),
            epsilon=1e4,
            sensitivity=1.0,
            shape=(DRAWS,),
        ),
        np.float64,
    )
    assert_ks(gaps, scipy.stats.expon(scale=1 / k_slope).cdf, alpha=ALPHA)


def test_piecewise_monotonic_and_sensitivity():
    edges, c, m, eps = PIECES["mixed"]
    draws = jaxdp.exponential_piecewise(
        KEY,
        jnp.array(edges),
        jnp.array(c),
        jnp.array(m),
        epsilon=eps,
        sensitivity=2.0,
        monotonic=True,
        shape=(DRAWS,),
    )
    assert_ks(draws, piecewise_cdf(edges, c, m, eps / 2.0))
    with pytest.raises(AssertionError):
        assert_ks(draws, piecewise_cdf(edges, c, m, eps / 4.0))


def test_piecewise_float64():
    edges, c, m, eps = PIECES["mixed"]
    with jax.enable_x64():
        draws = jaxdp.exponential_piecewise(
            KEY,
            jnp.array(edges),
            jnp.array(c),
            jnp.array(m),
            epsilon=eps,
            sensitivity=1.0,
            shape=(DRAWS,),
        )
        assert draws.dtype == jnp.float64
    assert_ks(draws, piecewise_cdf(edges, c, m, eps / 2))


def test_piecewise_batch_shape_jit_vmap():
    edges = jnp.array([0.0, 1.0, 2.0])
    c = jnp.array([0.0, 0.0])
    m = jnp.array([1.0, -1.0])
    eps = jnp.array([0.5, 2.0, 8.0])
    kw = dict(sensitivity=1.0)
    scalar = jax.eval_shape(
        lambda: jaxdp.exponential_piecewise(KEY, edges, c, m, epsilon=1.0, **kw)
    )
    assert scalar.shape == ()
    batched = jaxdp.exponential_piecewise(KEY, edges, c, m, epsilon=eps, shape=(50_000, 3), **kw)
    assert batched.shape == (50_000, 3)
    draw = jax.jit(
        lambda k, e: jaxdp.exponential_piecewise(k, edges, c, m, epsilon=e, shape=(50_000,), **kw)
    )
    vmapped = jax.vmap(draw, in_axes=(None, 0), out_axes=1)(KEY, eps)
    for col in range(3):
        cdf = piecewise_cdf(np.asarray(edges), np.asarray(c), np.asarray(m), float(eps[col]) / 2)
        assert_ks(batched[:, col], cdf)
        assert_ks(vmapped[:, col], cdf)
    eager = jaxdp.exponential_piecewise(KEY, edges, c, m, epsilon=2.0, shape=(50_000,), **kw)
    np.testing.assert_array_equal(draw(KEY, 2.0), eager)
    rows = jaxdp.exponential_piecewise(
        KEY, jnp.stack([edges, edges + 10]), c, m, epsilon=1.0, shape=(4, 2), **kw
    )
    assert rows.shape == (4, 2)
    assert np.all(np.asarray(rows[:, 0]) <= 2) and np.all(np.asarray(rows[:, 1]) >= 10)


# ----------------------------------------------------------------------------- pricing

BIDS = [1.0, 1.0, 1.0, 3.01]
PRICE_RANGE = (0.0, 3.5)


def revenue(price, bids):
    b = np.asarray(bids, np.float64)
    p = np.asarray(price, np.float64)
    return p * (b[None, :] >= p[..., None]).sum(-1)


@pytest.mark.parametrize("eps", [0.5, 5.0])
def test_price_classic_example_matches_exact_cdf(eps):
    prices = jaxdp.private_price(
        KEY, jnp.array(BIDS), epsilon=eps, bounds=PRICE_RANGE, shape=(DRAWS,)
    )
    assert prices.shape == (DRAWS,) and prices.dtype == jnp.float32
    p = np.asarray(prices, np.float64)
    assert np.all((p >= 0) & (p <= 3.5))
    assert_ks(p, price_cdf(BIDS, *PRICE_RANGE, eps))
    with pytest.raises(AssertionError):  # the same law without the high bidder
        assert_ks(p, price_cdf(BIDS[:3], *PRICE_RANGE, eps))
    # P[price > 3.01] (revenue 0 there) has its exact value
    exact_above = 1 - price_cdf(BIDS, *PRICE_RANGE, eps)(np.array([3.01]))[0]
    above = int(np.sum(p > 3.01))
    assert scipy.stats.binomtest(above, DRAWS, exact_above).pvalue > ALPHA


def test_price_of_3_02_earns_nothing():
    assert revenue(np.array([1.0, 3.01, 3.02]), BIDS).tolist() == [4.0, 3.01, 0.0]
    prices = np.asarray(
        jaxdp.private_price(KEY, jnp.array(BIDS), epsilon=50.0, bounds=PRICE_RANGE, shape=(DRAWS,)),
        np.float64,
    )
    # with a large epsilon the mechanism posts prices just below 1 (revenue ~4)
    assert np.mean(revenue(prices, BIDS)) > 3.8
    assert np.mean(prices > 3.01) < 1e-3


def test_price_many_bids_and_batch():
    rng = np.random.default_rng(1)
    bids = rng.uniform(0, 10, size=2000)
    prices = jaxdp.private_price(
        KEY,
        jnp.array(bids),
        epsilon=jnp.array([0.1, 1.0]),
        bounds=(0.0, 10.0),
        shape=(DRAWS // 2, 2),
    )
    for col, eps in enumerate([0.1, 1.0]):
        assert_ks(prices[:, col], price_cdf(bids, 0.0, 10.0, eps))
    with pytest.raises(AssertionError):
        assert_ks(prices[:, 0], price_cdf(bids, 0.0, 10.0, 1.0))


# ----------------------------------------------------------------------------- quantiles


@pytest.mark.parametrize("q, eps", [(0.5, 1.0), (0.1, 0.2), (0.0, 1.0), (1.0, 1.0)])
def test_quantile_random_data_matches_exact_cdf(q, eps):
    rng = np.random.default_rng(2)
    data = rng.normal(size=500) * 3
    draws = jaxdp.private_quantile(
        KEY, jnp.array(data), q, epsilon=eps, bounds=(-10.0, 10.0), shape=(DRAWS,)
    )
    assert draws.dtype == jnp.float32
    assert_ks(draws, quantile_cdf(data, q, -10.0, 10.0, eps))
    with pytest.raises(AssertionError):
        assert_ks(draws, quantile_cdf(data, min(q + 0.05, 1.0) if q < 1 else 0.95, -10, 10, eps))


def test_quantile_million_integer_points():
    # 1e6 integer values in [0, 100): almost every interval has length 0 (log-mass -inf)
    rng = np.random.default_rng(3)
    data = rng.integers(0, 100, size=10**6).astype(np.float32)
    eps = 2e-4  # about one unit of log-density per integer step of the data
    draws = jaxdp.private_quantile(
        KEY, jnp.asarray(data), 0.3, epsilon=eps, bounds=(0.0, 100.0), shape=(DRAWS,)
    )
    d = np.asarray(draws, np.float64)
    assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 100))
    assert_ks(d, quantile_cdf(data, 0.3, 0.0, 100.0, eps))
    with pytest.raises(AssertionError):
        assert_ks(d, quantile_cdf(data, 0.3, 0.0, 100.0, 2 * eps))
    # and a huge epsilon: everything in the one interval holding the 30% quantile
    sharp = np.asarray(
        jaxdp.private_quantile(
            KEY, jnp.asarray(data), 0.3, epsilon=1e4, bounds=(0.0, 100.0), shape=(1000,)
        )
    )
    true = np.sort(data)[int(0.3 * 10**6)]
    assert np.all(np.isfinite(sharp)) and np.all(np.abs(sharp - true) <= 1)


def test_quantile_clips_data_to_bounds():
    data = jnp.array([-50.0, -1.0, 0.5, 2.0, 70.0])
    clipped = jnp.clip(data, -2.0, 3.0)
    a = jaxdp.private_quantile(KEY, data, 0.5, epsilon=1.0, bounds=(-2.0, 3.0), shape=(100,))
    b = jaxdp.private_quantile(KEY, clipped, 0.5, epsilon=1.0, bounds=(-2.0, 3.0), shape=(100,))
    np.testing.assert_array_equal(a, b)


def test_quantile_vmap_over_q_and_epsilon():
    data = jnp.arange(100.0)
    qs = jnp.array([0.1, 0.5, 0.9])
    out = jax.vmap(
        lambda q, e: jaxdp.private_quantile(
            KEY, data, q, epsilon=e, bounds=(0.0, 100.0), shape=(2000,)
        )
    )(qs, jnp.array([5.0, 5.0, 5.0]))
    assert out.shape == (3, 2000)
    np.testing.assert_allclose(np.median(np.asarray(out), axis=1), [10, 50, 90], atol=2)
    batched = jaxdp.private_quantile(KEY, data, qs, epsilon=5.0, bounds=(0.0, 100.0))
    assert batched.shape == (3,)


# ----------------------------------------------------------------------------- arguments

E3 = jnp.array([0.0, 1.0, 2.0])
C2 = jnp.array([0.0, 1.0])
M2 = jnp.array([1.0, 0.0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(edges=jnp.array([0.0, 2.0, 1.0])), "sorted"),
        (dict(edges=jnp.array([0.0, jnp.nan, 2.0])), "edges"),
        (dict(edges=jnp.array([0.0, 1.0, jnp.inf])), "edges"),
        (dict(edges=jnp.array([1.0, 1.0, 1.0])), "positive length"),
        (dict(edges=jnp.array([0.0])), "edges"),
        (dict(intercepts=jnp.array([0.0, 1.0, 2.0])), "intercepts"),
        (dict(slopes=jnp.array([1.0])), "slopes"),
        (dict(intercepts=jnp.array([0.0, jnp.nan])), "intercepts"),
        (dict(intercepts=jnp.array([0.0, jnp.inf])), "intercepts"),
        (dict(intercepts=jnp.array([-jnp.inf, -jnp.inf])), "positive width"),
        (dict(slopes=jnp.array([1.0, jnp.inf])), "slopes"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(sensitivity=0.0), "sensitivity"),
        (dict(sensitivity=float("inf")), "sensitivity"),
        (dict(shape=(4, 3), epsilon=jnp.ones(2)), "shape"),
        (dict(key=jax.random.split(KEY, 3)), "key"),
    ],
)
def test_piecewise_bad_arguments(kwargs, match):
    args = dict(key=KEY, edges=E3, intercepts=C2, slopes=M2, epsilon=1.0, sensitivity=1.0)
    args.update(kwargs)
    key = args.pop("key")
    edges, c, m = args.pop("edges"), args.pop("intercepts"), args.pop("slopes")
    with pytest.raises(ValueError, match=match) as info:
        jaxdp.exponential_piecewise(key, edges, c, m, **args)
    assert "exponential_piecewise" in str(info.value)


@pytest.mark.parametrize(
    "bids, kwargs, match",
    [
        ([1.0, float("nan")], {}, "bids"),
        ([1.0, float("inf")], {}, None),  # a bid above every price is data
        ([1.0], dict(bounds=(3.0, 3.0)), "lo < hi"),
        ([1.0], dict(bounds=(3.0, 1.0)), "lo < hi"),
        ([1.0], dict(bounds=(-1.0, 3.0)), "lo >= 0"),
        ([1.0], dict(bounds=(0.0, float("inf"))), "finite"),
        ([1.0], dict(bounds=(0.0, 1.0, 2.0)), "pair"),
        ([1.0], dict(bounds=None), "required"),
        ([1.0], dict(bounds=(0.0, 3e38)), None),  # a width of 3e38 fits float32
        ([1.0], dict(bounds=(0.0, 1.0), price_range=(0.0, 1.0)), "once"),
        ([1.0], dict(epsilon=0.0), "epsilon"),
        ([1.0], dict(epsilon=None), "epsilon"),
        (3.0, {}, "scalar"),
    ],
)
def test_price_bad_arguments(bids, kwargs, match):
    args = dict(epsilon=1.0, bounds=(0.0, 3.5))
    args.update(kwargs)
    if match is None:
        assert np.isfinite(jaxdp.private_price(KEY, bids, **args))
        return
    with pytest.raises(ValueError, match=match) as info:
        jaxdp.private_price(KEY, bids, **args)
    assert "private_price" in str(info.value)


def test_infinite_data_points_are_beyond_the_bounds():
    # data, never an error: +-inf is clipped like any value outside the bounds
    kw = dict(epsilon=1.0, bounds=(-5.0, 5.0), shape=(8,))
    for inf, edge in ((np.inf, 5.0), (-np.inf, -5.0)):
        np.testing.assert_array_equal(
            jaxdp.private_quantile(KEY, [1.0, inf, 2.0], 0.5, **kw),
            jaxdp.private_quantile(KEY, [1.0, edge, 2.0], 0.5, **kw),
        )
        np.testing.assert_array_equal(
            jaxdp.private_quantiles(KEY, [1.0, inf, 2.0], [0.2, 0.5], **kw),
            jaxdp.private_quantiles(KEY, [1.0, edge, 2.0], [0.2, 0.5], **kw),
        )


@pytest.mark.parametrize(
    "data, q, kwargs, match",
    [
        ([1.0, float("nan")], 0.5, {}, "data"),
        ([1.0], -0.1, {}, "q must be in"),
        ([1.0], 1.5, {}, "q must be in"),
        ([1.0], float("nan"), {}, "q"),
        ([1.0], jnp.array([0.5, 2.0]), {}, "q must be in"),
        ([1.0], 0.5, dict(bounds=(1.0, 1.0)), "lo < hi"),
        ([1.0], 0.5, dict(bounds=(2.0, -2.0)), "lo < hi"),
        ([1.0], 0.5, dict(bounds=(float("-inf"), 2.0)), "finite"),
        ([1.0], 0.5, dict(bounds=[0.0]), "pair"),
        ([1.0], 0.5, dict(bounds=(-3e38, 3e38)), "overflows"),
        ([1.0], 0.5, dict(epsilon=-2.0), "epsilon"),
        ([1.0], 0.5, dict(shape=(3, 2)), None),  # fine: leading draws over batch ()
    ],
)
def test_quantile_bad_arguments(data, q, kwargs, match):
    args = dict(epsilon=1.0, bounds=(-5.0, 5.0))
    args.update(kwargs)
    if match is None:
        assert jaxdp.private_quantile(KEY, data, q, **args).shape == (3, 2)
        return
    with pytest.raises(ValueError, match=match) as info:
        jaxdp.private_quantile(KEY, data, q, **args)
    assert "private_quantile" in str(info.value)


def test_traced_bad_values_give_nan_and_checkify_reports():
    bids = jnp.array(BIDS)

    def price(b, e):
        return jaxdp.private_price(KEY, b, epsilon=e, bounds=(0.0, 3.5), shape=(3,))

    checked = checkify.checkify(jax.jit(price), errors=checkify.user_checks)
    err, out = checked(bids.at[0].set(jnp.nan), 1.0)
    assert "bids must be finite" in str(err.get()) and np.all(np.isnan(out))
    err, out = checked(bids.at[0].set(9.0), 1.0)  # a bid above the range is data
    assert err.get() is None and np.all(np.isfinite(out))
    err, out = checked(bids, -1.0)
    assert "epsilon must be finite" in str(err.get()) and np.all(np.isnan(out))
    err, out = checked(bids, 1.0)
    assert err.get() is None and np.all(np.isfinite(out))
    assert np.all(np.isnan(jax.jit(price)(bids.at[0].set(jnp.nan), 1.0)))  # plain jit: NaN
    # an infinite bid is a bid above every price: data, never an error or a NaN
    err, out = checked(bids.at[0].set(jnp.inf), 1.0)
    assert err.get() is None and np.all(np.isfinite(out))
    np.testing.assert_array_equal(out, price(bids.at[0].set(3.5), 1.0))
    np.testing.assert_array_equal(
        jaxdp.private_price(KEY, bids.at[0].set(jnp.inf), epsilon=1.0, bounds=(0.0, 3.5)),
        jaxdp.private_price(KEY, bids.at[0].set(3.5), epsilon=1.0, bounds=(0.0, 3.5)),
    )

    def quantile(q):
        return jaxdp.private_quantile(KEY, jnp.arange(5.0), q, epsilon=1.0, bounds=(0, 5))

    err, out = checkify.checkify(jax.jit(quantile), errors=checkify.user_checks)(1.5)
    assert "q must be in [0, 1]" in str(err.get()) and np.isnan(out)

    def piecewise(edges):
        return jaxdp.exponential_piecewise(KEY, edges, C2, M2, epsilon=1.0, sensitivity=1.0)

    err, out = checkify.checkify(jax.jit(piecewise), errors=checkify.user_checks)(
        jnp.array([0.0, 2.0, 1.0])
    )
    assert "non-decreasing" in str(err.get()) and np.isnan(out)


def test_jit_equals_eager_and_key_semantics():
    def price(k):
        return jaxdp.private_price(
            k, jnp.array(BIDS), epsilon=1.0, bounds=PRICE_RANGE, shape=(100,)
        )

    eager = price(KEY)
    np.testing.assert_array_equal(eager, jax.jit(price)(KEY))
    np.testing.assert_array_equal(eager, price(jax.random.PRNGKey(0)))
    assert not np.array_equal(eager, price(jax.random.key(1)))
    assert jax.vmap(price)(jax.random.split(KEY, 3)).shape == (3, 100)


# ----------------------------------------------------------------------------- grid path


def test_grid_path_resolution_term():
    """exponential over score_fn(grid): OPT_grid >= OPT - L h / 2, and the bound
    P[u <= OPT - L h/2 - 2Δ/ε (ln N + t)] <= e^-t holds exactly (log-probs), while
    dropping the L h / 2 term fails."""
    lipschitz, lo, hi, delta = 50.0, 0.0, 1.0, 1.0
    num = 101
    grid = np.linspace(lo, hi, num)
    h = grid[1] - grid[0]
    peak = (grid[40] + grid[41]) / 2  # the optimum sits half-way between grid points

    def utility(r):
        return -lipschitz * jnp.abs(r - peak)

    scores = jax.vmap(utility)(jnp.asarray(grid, jnp.float32))
    opt = 0.0
    assert float(jnp.max(scores)) >= opt - lipschitz * h / 2 - 1e-5
    for eps in (1.0, 100.0, 1e4):
        logp = np.asarray(
            jaxdp.exponential_log_probs(scores, epsilon=eps, sensitivity=delta), np.float64
        )
        u = np.asarray(scores, np.float64)
        for t in (0.5, 2.0, 5.0):
            gap = lipschitz * h / 2 + 2 * delta / eps * (np.log(num) + t)
            assert np.exp(logp[u <= opt - gap + 1e-9]).sum() <= np.exp(-t) + 1e-6
    # without the resolution term the bound is false at large epsilon
    eps, t = 1e4, 2.0
    logp = np.asarray(
        jaxdp.exponential_log_probs(scores, epsilon=eps, sensitivity=delta), np.float64
    )
    gap = 2 * delta / eps * (np.log(num) + t)
    assert np.exp(logp[np.asarray(scores) <= opt - gap]).sum() > np.exp(-t)
    draws = jaxdp.exponential(KEY, scores, epsilon=eps, sensitivity=delta, shape=(1000,))
    np.testing.assert_allclose(grid[np.asarray(draws)], peak, atol=h / 2 + 1e-9)


def test_grid_path_converges_to_exact_price_law():
    # On a fine grid the discretised price law is close to the exact one (KS
    # distance of the order of the grid spacing times the density).
    eps = 1.0
    grid = np.linspace(0.0, 3.5, 3500)
    scores = jnp.asarray(revenue(grid, BIDS), jnp.float32)
    idx = jaxdp.exponential(KEY, scores, epsilon=eps, sensitivity=3.5, shape=(DRAWS,))
    grid_draws = grid[np.asarray(idx)]
    exact_draws = np.asarray(
        jaxdp.private_price(KEY, jnp.array(BIDS), epsilon=eps, bounds=PRICE_RANGE, shape=(DRAWS,)),
        np.float64,
    )
    cdf = price_cdf(BIDS, *PRICE_RANGE, eps)
    d_grid = scipy.stats.kstest(grid_draws, cdf).statistic
    d_exact = scipy.stats.kstest(exact_draws, cdf).statistic
    assert d_exact < 0.005 and d_grid < 0.01


@pytest.mark.slow
def test_pricing_study_quick_mode(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks import pricing

    results = pricing.main(["--quick", "--out", str(tmp_path)])
    for name in ("price_density", "revenue_loss", "quantile_density"):
        assert (tmp_path / f"{name}.json").exists() and (tmp_path / f"{name}.png").exists()
    classic = results["revenue_loss"]["scenarios"][0]
    assert classic["opt_revenue"] == 4.0
    assert all(loss >= 0 for loss in classic["loss_exact_expected"])


# ----------------------------------------------------------------------------- data never raises


def test_price_bids_outside_bounds_are_clipped_in_law():
    bids = BIDS + [9.0, -2.0, 3.6]  # above, below (and negative) and above the range
    prices = jaxdp.private_price(
        KEY, jnp.array(bids), epsilon=2.0, bounds=PRICE_RANGE, shape=(DRAWS,)
    )
    clipped = np.clip(bids, *PRICE_RANGE)
    assert_ks(prices, price_cdf(clipped, *PRICE_RANGE, 2.0))
    with pytest.raises(AssertionError):  # dropping the out-of-range bids is caught
        assert_ks(prices, price_cdf(BIDS, *PRICE_RANGE, 2.0))
    jitted = jax.jit(
        lambda b: jaxdp.private_price(KEY, b, epsilon=2.0, bounds=PRICE_RANGE, shape=(DRAWS,))
    )(jnp.array(bids))
    np.testing.assert_array_equal(jitted, prices)


def test_price_range_is_deprecated_alias_of_bounds():
    with pytest.warns(DeprecationWarning, match="price_range"):
        old = jaxdp.private_price(
            KEY, jnp.array(BIDS), epsilon=1.0, price_range=PRICE_RANGE, shape=(50,)
        )
    new = jaxdp.private_price(KEY, jnp.array(BIDS), epsilon=1.0, bounds=PRICE_RANGE, shape=(50,))
    np.testing.assert_array_equal(old, new)


@pytest.mark.parametrize("fn", ["quantile", "price"])
def test_empty_data_draws_uniformly_over_bounds(fn):
    lo, hi = 1.0, 4.0

    def draw(x):
        if fn == "quantile":
            return jaxdp.private_quantile(KEY, x, 0.3, epsilon=1.0, bounds=(lo, hi), shape=(DRAWS,))
        return jaxdp.private_price(KEY, x, epsilon=1.0, bounds=(lo, hi), shape=(DRAWS,))

    out = draw(jnp.zeros((0,)))
    np.testing.assert_array_equal(jax.jit(draw)(jnp.zeros((0,))), out)
    assert_ks(out, scipy.stats.uniform(lo, hi - lo).cdf)
    with pytest.raises(AssertionError):
        assert_ks(out, scipy.stats.uniform(lo, 1.02 * (hi - lo)).cdf)
    batched = jaxdp.private_quantile(KEY, jnp.zeros((2, 0)), 0.5, epsilon=1.0, bounds=(lo, hi))
    assert batched.shape == (2,) and np.all((batched >= lo) & (batched <= hi))


def test_quantile_sensitivity_is_max_q_one_minus_q():
    rng = np.random.default_rng(7)
    data = rng.uniform(-1, 1, size=200)
    for q in (0.5, 0.8):
        draws = jaxdp.private_quantile(
            KEY, jnp.array(data), q, epsilon=0.5, bounds=(-1.0, 1.0), shape=(DRAWS,)
        )
        assert_ks(draws, quantile_cdf(data, q, -1.0, 1.0, 0.5))
        # the loose sensitivity 1 (factor eps / 2) is a different law, and is caught
        loose = quantile_cdf(data, q, -1.0, 1.0, 0.5 * max(q, 1 - q))
        with pytest.raises(AssertionError):
            assert_ks(draws, loose)


def test_quantile_tight_sensitivity_is_private_exactly():
    # exact log-density ratio on add/remove neighbours <= eps (float64, on a fine grid)
    rng = np.random.default_rng(8)
    base = rng.uniform(0, 1, size=30)
    grid = np.linspace(0.0005, 0.9995, 2000)
    for q in (0.1, 0.5, 0.75):
        for extra in (0.0, 0.3, 0.999):
            d0, d1 = base, np.append(base, extra)
            dens = []
            for d in (d0, d1):
                cdf = quantile_cdf(d, q, 0.0, 1.0, 1.0)
                dens.append(np.diff(cdf(grid)) / np.diff(grid))
            ratio = np.max(np.abs(np.log(dens[0]) - np.log(dens[1])))
            assert ratio <= 1.0 + 1e-6, (q, extra, ratio)


def test_piecewise_huge_edges_raise_or_report():
    huge = jnp.array([-3e38, 3e38])
    with pytest.raises(ValueError, match="overflows"):
        jaxdp.exponential_piecewise(
            KEY, huge, jnp.zeros(1), jnp.zeros(1), epsilon=1.0, sensitivity=1.0
        )
    with pytest.raises(ValueError, match="overflows"):  # the utility overflows at an edge
        jaxdp.exponential_piecewise(
            KEY,
            jnp.array([0.0, 3e38]),
            jnp.zeros(1),
            jnp.full(1, 10.0),
            epsilon=1.0,
            sensitivity=1.0,
        )

    def piecewise(edges):
        return jaxdp.exponential_piecewise(
            KEY, edges, jnp.zeros(1), jnp.zeros(1), epsilon=1.0, sensitivity=1.0
        )

    err, out = checkify.checkify(jax.jit(piecewise), errors=checkify.user_checks)(huge)
    assert "overflow" in str(err.get()) and np.isnan(out)
    # the widest span that fits still samples the right (uniform) law
    wide = jaxdp.exponential_piecewise(
        KEY,
        jnp.array([-1.5e38, 1.5e38]),
        jnp.zeros(1),
        jnp.zeros(1),
        epsilon=1.0,
        sensitivity=1.0,
        shape=(DRAWS,),
    )
    assert_ks(np.asarray(wide, np.float64) / 1.5e38, scipy.stats.uniform(-1, 2).cdf)


@pytest.mark.parametrize("bad", ["False", "True", 0, 1, None, jnp.array([True])])
def test_piecewise_monotonic_must_be_a_bool(bad):
    with pytest.raises(ValueError, match="monotonic must be a bool"):
        jaxdp.exponential_piecewise(KEY, E3, C2, M2, epsilon=1.0, sensitivity=1.0, monotonic=bad)
    out = jaxdp.exponential_piecewise(
        KEY, E3, C2, M2, epsilon=1.0, sensitivity=1.0, monotonic=np.bool_(True)
    )
    assert np.isfinite(out)
