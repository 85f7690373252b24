"""Finite precision of the continuous ranges' log-masses (SECURITY.md, "Continuous ranges").

The interval of a draw is chosen by the categorical kernel from double-float
log-masses ``U + log w + psi(y)``. These tests pin each term's *absolute* error,
at every magnitude, against float64, and check the quantile's and the price's
utilities on neighbouring datasets at sizes where their float32 rounding alone
broke the privacy bound (the float32 computation that the code used before is
run beside them and must fail the same check).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from jaxdp import _continuous

U = 2.0**-24


def _dd64(pair) -> np.ndarray:
    hi, lo = pair
    return np.asarray(hi, np.float64) + np.asarray(lo, np.float64)


def _ulps(lo: float, hi: float, count: int) -> np.ndarray:
    """``count`` float32 values spread log-uniformly over ``[lo, hi]``, plus their
    neighbours one ulp away (so that every binade and its edges are hit)."""
    grid = np.geomspace(lo, hi, count).astype(np.float32)
    down, up = np.nextafter(grid, np.float32(0)), np.nextafter(grid, np.float32(np.inf))
    return np.unique(np.concatenate([grid, down, up]))


def test_backend_expm1_and_log_within_assumed_error():
    """The bounds assume expm1 within EXPM1_ERROR_U u and log within LOG_ERROR_U u on
    the arguments the log-masses pass (expm1 on [-88, -1e-3], log on [sqrt(1/2),
    sqrt 2), where |log| <= 0.35); measured on this backend against float64."""
    y = _ulps(1e-3, 88.0, 200_000)
    got = np.asarray(jax.jit(lambda v: jnp.expm1(-v))(jnp.asarray(y)), np.float64)
    want = np.expm1(-y.astype(np.float64))
    expm1_err = np.max(np.abs(got / want - 1)) / U
    m = np.linspace(math.sqrt(0.5), math.sqrt(2), 400_001).astype(np.float32)
    m = m[m != 1]
    got = np.asarray(jax.jit(jnp.log)(jnp.asarray(m)), np.float64)
    want = np.log(m.astype(np.float64))
    log_err = np.max(np.abs(got / want - 1)) / U
    assert expm1_err <= _continuous.EXPM1_ERROR_U, expm1_err
    assert log_err <= _continuous.LOG_ERROR_U, log_err


def test_log_is_absolutely_accurate_at_every_magnitude():
    """|log_dd(x) - log x| <= 1.4u for x across float32's normal range (jnp.log is
    off by ~2u |log x|: 170u at 1e-38), and log 0 = -inf."""
    x = _ulps(1.2e-38, 3.4e38, 100_000)
    err = np.abs(_dd64(jax.jit(_continuous._log_dd)(jnp.asarray(x))) - np.log(x.astype(np.float64)))
    assert np.max(err) <= 1.4 * U, np.max(err) / U
    plain = np.abs(np.asarray(jnp.log(jnp.asarray(x)), np.float64) - np.log(x.astype(np.float64)))
    assert np.max(plain) > 20 * U  # what the dd form avoids
    hi, lo = _continuous._log_dd(jnp.asarray([0.0, 1.0], jnp.float32))
    assert np.asarray(hi)[0] == -np.inf and np.asarray(lo)[0] == 0
    assert np.asarray(hi)[1] == 0 and np.asarray(lo)[1] == 0


def test_log_shape_is_absolutely_accurate():
    """psi(y) = log((1 - e^-y)/y) within 11u absolute for y from 0 to 1e30."""
    y = np.concatenate([[0.0], _ulps(1e-30, 1e30, 100_000)]).astype(np.float32)
    got = _dd64(jax.jit(_continuous._log_shape)(jnp.asarray(y)))
    y64 = y.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(y64 < 1e-6, -y64 / 2 + y64**2 / 24, np.log(-np.expm1(-y64)) - np.log(y64))
    err = np.abs(got - want)
    assert np.max(err) <= 11 * U, np.max(err) / U


def _old_log_masses(edges: np.ndarray, upper: np.ndarray, drop: np.ndarray) -> np.ndarray:
    """The float32 log-masses of the code before: upper + log(w) + psi(drop), each
    term rounded to float32 (the test's deliberately imprecise twin)."""
    e = jnp.asarray(edges)
    w = e[:, 1:] - e[:, :-1]
    y = jnp.asarray(drop)
    small = y < 1e-3
    safe = jnp.where(small, 1.0, y)
    psi = jnp.where(small, y * (-0.5 + y / 24), jnp.log(-jnp.expm1(-safe)) - jnp.log(safe))
    return np.asarray(jnp.asarray(upper) + jnp.log(w) + psi, np.float64)


def test_log_masses_within_1e_12_at_any_width():
    """Widths from 1e-30 to 1e30 and drops from 0 to 1e20 in one row: every
    log-mass within 1e-12 absolute of the float64 one at the given drops (float32
    rows compute ``log w + psi`` in float64; the double-float32 terms were within
    18u, about 1e-6; the old float32 sum: over 100u)."""
    rng = np.random.default_rng(0)
    widths = np.geomspace(1e-30, 1e30, 400)
    rng.shuffle(widths)
    edges = np.concatenate([[0.0], np.cumsum(widths)]).astype(np.float32)[None, :]
    edges = np.maximum.accumulate(edges, axis=-1)
    drop = np.geomspace(1e-8, 1e20, 400).astype(np.float32)[None, :]
    upper = (-rng.uniform(0, 40, (1, 400))).astype(np.float32)
    zero = jnp.zeros_like(jnp.asarray(upper))
    masses = jax.jit(_continuous._log_masses)
    got = _dd64(masses(jnp.asarray(edges), (jnp.asarray(upper), zero), jnp.asarray(drop)))
    e64 = edges.astype(np.float64)
    w = e64[:, 1:] - e64[:, :-1]
    y = drop.astype(np.float64)
    with np.errstate(divide="ignore"):  # widths that round to 0: log-mass -inf
        want = upper + np.log(w) + np.log(-np.expm1(-y)) - np.log(y)
    live = w > 0
    err = np.abs(got[live] - want[live])
    assert np.max(err) <= 1e-12, np.max(err) / U
    with np.errstate(divide="ignore"):
        old = np.abs(_old_log_masses(edges, upper, drop)[live] - want[live])
    assert np.max(old) > 100 * U, np.max(old) / U


def _new_quantile_logits(q: np.float32, n: int, scale: np.float32) -> np.ndarray:
    hi, lo = jax.jit(_continuous._quantile_logits, static_argnums=1)(
        jnp.asarray([q]), n, jnp.asarray([scale])
    )
    return (np.asarray(hi, np.float64) + np.asarray(lo, np.float64))[0]


def _old_quantile_logits(q: np.float32, n: int, scale: np.float32) -> np.ndarray:
    """The float32 logits of the code before: k (-|j - fl(q n)| - max)."""
    j = jnp.arange(n + 1, dtype=jnp.float32)
    utility = -jnp.abs(j - jnp.float32(q) * n)
    return np.asarray((utility - jnp.max(utility)) * jnp.float32(scale), np.float64)


@pytest.mark.parametrize("n, q", [(10**6, 0.3), (2**23 + 12345, 0.3), (10**7, 0.49)])
def test_quantile_logits_exact_at_large_n(n, q):
    """private_quantile's logits k (u_j - max u), u_j = -|j - q n|, within 1e-6 of
    float64 (exact there: q n has at most 24 + 24 bits) up to a common shift, at n
    up to 10**7. With q n rounded to float32, as before, they were off by up to
    k ulp(q n) / 2, and q n moved between neighbours by q +- ulp(q n), outside the
    band that the sensitivity max(q, 1 - q) covers (the test catches it)."""
    q32 = np.float32(q)
    scale = np.float32(1 / (2 * max(float(q32), 1 - float(q32))) * (1 - 8 * U))
    utility = -np.abs(np.arange(n + 1, dtype=np.float64) - float(q32) * n)
    want = float(scale) * (utility - np.max(utility))
    live = want > -100
    err = (_new_quantile_logits(q32, n, scale) - want)[live]
    assert np.max(err) - np.min(err) <= 1e-6
    old = (_old_quantile_logits(q32, n, scale) - want)[live]
    assert np.max(old) - np.min(old) > 1e-4


def test_price_logits_exact_at_large_n():
    """The revenue logits k (R_j - max R) within 1e-6 absolute of float64 for 10**6
    bids up to 1e3 (the float32 revenue was off by up to u ε n / 2 = 0.03)."""
    n, hi, epsilon = 10**6, 1000.0, 1.0
    rng = np.random.default_rng(1)
    prices = np.sort(rng.uniform(0, hi, n)).astype(np.float32)
    prices = np.append(prices, np.float32(hi))[None, :]
    scale = np.float32(epsilon / (2 * hi) * (1 - 8 * U))
    got = _dd64(jax.jit(_continuous._price_logits)(jnp.asarray(prices), jnp.asarray([scale])))[0]
    count = (n - np.arange(n + 1)).astype(np.float64)
    revenue = count * prices[0].astype(np.float64)
    want = float(scale) * (revenue - np.max(revenue))
    live = want > -100
    err = (got - want)[live]  # up to a common shift, which the law ignores
    assert np.max(err) - np.min(err) <= 1e-6
    old_revenue = jnp.asarray(count, jnp.float32) * jnp.asarray(prices[0])
    old = (np.asarray((old_revenue - jnp.max(old_revenue)) * scale, np.float64) - want)[live]
    assert np.max(old) - np.min(old) > 1e-3


def test_piecewise_log_masses_in_one_program_within_4u():
    """exponential_piecewise's log-masses as its program computes them, from the
    lines to the sums in one jit (where XLA may fuse and contract the error-free
    transforms differently than in the pieces' tests): large intercepts, steep and
    flat slopes and widths from 1e-20 to 1e20, each within ``a = 4u`` (the drop's
    float32 rounding) of float64 up to the common shift (the double-float32 terms:
    18u; the float32 computation of before: over 1e-3)."""
    rng = np.random.default_rng(3)
    m = 600
    edges = np.geomspace(1e-20, 1e20, m + 1).astype(np.float32)[None, :]
    e64 = edges.astype(np.float64)
    w32 = np.diff(e64, axis=-1)
    c = (1e6 + rng.normal(size=(1, m)) * 10).astype(np.float32)
    steep = np.geomspace(1e-2, 1e6, m)
    rng.shuffle(steep)
    slope = (rng.choice([-1, 1], (1, m)) * steep / w32).astype(np.float32)
    scale = np.float32(0.5)

    def program(edges, c, slope, scale):
        a, b = edges[:, :-1], edges[:, 1:]
        u_top = _continuous._affine(c, slope, jnp.where(slope > 0, b, a))
        best = jnp.max(jnp.where(b - a > 0, u_top[0], -jnp.inf), axis=-1)
        upper = _continuous._scaled_gap(u_top, best, scale)
        drop = _continuous._drop(scale, jnp.abs(slope), b - a)
        return _continuous._log_masses(edges, upper, drop), drop

    (got_h, got_l), drop = jax.jit(program)(edges, c, slope, jnp.asarray([scale]))
    got = _dd64((got_h, got_l))
    c64, s64 = c.astype(np.float64), slope.astype(np.float64)
    a, b = e64[:, :-1], e64[:, 1:]
    u_top = c64 + s64 * np.where(s64 > 0, b, a)
    w = b - a
    y = float(scale) * np.abs(s64) * w
    live = (w > 0) & (y > 1e-3) & (y < 1e30)
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.log(-np.expm1(-y)) - np.log(y)
        want = float(scale) * u_top + np.log(w) + psi
    err = got[live] - want[live]
    assert np.count_nonzero(live) > 100
    assert np.max(err) - np.min(err) <= 2 * (4 * U + 1e-12), (np.max(err) - np.min(err)) / U
    # At the drops as computed (float32), only the utilities' nu = 6u**2 k max|u| is left
    y32 = np.asarray(drop, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        at_drop = float(scale) * u_top + np.log(w) + np.log(-np.expm1(-y32)) - np.log(y32)
    nu = 6 * U**2 * float(scale) * np.max(np.abs(u_top[live]))
    err = got[live] - at_drop[live]
    assert np.max(err) - np.min(err) <= 2 * (nu + 1e-12), (np.max(err) - np.min(err)) / U
    old_upper = (jnp.maximum(c + slope * edges[:, :-1], c + slope * edges[:, 1:]) - 1e6) * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        old = _old_log_masses(edges, np.asarray(old_upper), np.asarray(drop))[live] - want[live]
    assert np.max(old) - np.min(old) > 1e-3


def _continuous_samplers():
    import jaxdp

    return {
        "private_quantile": lambda k, x, e: jaxdp.private_quantile(
            k, x, 0.3, epsilon=e, bounds=(0.0, 10.0), shape=(7,)
        ),
        "private_price": lambda k, x, e: jaxdp.private_price(
            k, x, epsilon=e, bounds=(0.0, 10.0), shape=(7,)
        ),
        "exponential_piecewise": lambda k, x, e: jaxdp.exponential_piecewise(
            k, jnp.sort(x), x[:-1], x[1:] - 5.0, epsilon=e, sensitivity=1.0, shape=(7,)
        ),
        "private_quantiles": lambda k, x, e: jaxdp.private_quantiles(
            k, x, jnp.array([0.3, 0.6]), epsilon=e, bounds=(0.0, 10.0), shape=(7,)
        ),
    }


@pytest.mark.parametrize("name", ["private_quantile", "private_price", "exponential_piecewise"])
def test_float64_log_masses_under_transformations(name):
    """The float64 block inside the float32 samplers under the transformations that
    re-trace it after its ``jax.enable_x64`` has closed: jit, checkify and linearize
    give the eager draws, a jitted vmap over ε gives each ε's own, grad reaches the
    inputs (pytest turns a dtype-truncation warning into an error)."""
    from jax.experimental import checkify

    f = _continuous_samplers()[name]
    key = jax.random.key(1)
    x = jnp.asarray(np.random.default_rng(0).uniform(0, 10, size=(50,)).astype(np.float32))
    base = np.asarray(f(key, x, 1.0))
    for out in (
        jax.jit(f)(key, x, 1.0),
        checkify.checkify(jax.jit(f))(key, x, 1.0)[1],
        jax.linearize(lambda x: f(key, x, 1.0), x)[0],
    ):
        np.testing.assert_array_equal(out, base)
    grid = jnp.array([0.5, 1.0, 2.0])
    rows = jax.jit(jax.vmap(lambda e: f(key, x, e)))(grid)
    for e, row in zip(grid, rows, strict=True):
        np.testing.assert_array_equal(row, f(key, x, e))
    grad = jax.jit(jax.grad(lambda x: f(key, x, 1.0).sum()))(x)
    assert grad.shape == x.shape and bool(jnp.all(jnp.isfinite(grad)))


@pytest.mark.parametrize("name", ["private_quantile", "private_quantiles"])
def test_interval_narrower_than_float32_normal_range_keeps_its_mass(name):
    """Bounds (0, 2e-38) and one record at 1.5e-38: the interval above the record is
    5e-39 wide, below float32's normal range, where XLA:CPU flushes a float32
    difference to 0. Its exact probability is 1/4 (the density is flat: both
    intervals are 1/2 from the target), as for the empty neighbour. Widths and
    points are computed in float64: with the float32 ones it was never drawn (an
    output the neighbour draws a quarter of the time)."""
    import jaxdp

    data = jnp.array([1.5e-38], jnp.float32)
    draws = 20_000
    if name == "private_quantile":
        out = jaxdp.private_quantile(
            jax.random.key(0), data, 0.5, epsilon=1.0, bounds=(0.0, 2e-38), shape=(draws,)
        )
    else:
        out = jaxdp.private_quantiles(
            jax.random.key(0),
            data,
            jnp.array([0.5]),
            epsilon=1.0,
            bounds=(0.0, 2e-38),
            shape=(draws,),
        )[..., 0]
    above = int(np.sum(np.asarray(out) > 1.5e-38))
    assert scipy.stats.binomtest(above, draws, 0.25).pvalue > 1e-4, above / draws


@pytest.mark.parametrize("errors", ["all_checks", "div_checks", "index_checks"])
@pytest.mark.parametrize("name", sorted(_continuous_samplers()))
def test_float64_blocks_under_checkify_error_sets(name, errors):
    """checkify's own division and index checks run after the float64 blocks'
    ``jax.enable_x64`` has closed: they must meet no float64 division and no int64
    index there (a dtype-truncation warning, an error here)."""
    from jax.experimental import checkify

    f = _continuous_samplers()[name]
    x = jnp.asarray(np.random.default_rng(0).uniform(0, 10, size=(50,)).astype(np.float32))
    err, out = checkify.checkify(
        jax.jit(lambda x: f(jax.random.key(1), x, 0.3)), errors=getattr(checkify, errors)
    )(x)
    if name == "private_quantiles" and errors == "all_checks":  # its walk's -inf logits:
        assert err.get() in (None, "nan generated by primitive: sub.")  # test_debug_check
    else:
        assert err.get() is None, err.get()
    np.testing.assert_array_equal(out, f(jax.random.key(1), x, 0.3))
