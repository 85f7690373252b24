"""Laplace and the analytic Gaussian mechanism against their exact laws."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from laws import analytic_gaussian_sigma, assert_matches_cdf

import jaxdp
from jaxdp import _random
from jaxdp._additive import analytic_gaussian_sigma as jaxdp_sigma

N = 300_000


@pytest.mark.parametrize("eps,sens", [(1.0, 1.0), (0.3, 2.0), (5.0, 0.1)])
def test_laplace_law(eps, sens):
    values = jnp.array([0.0, 10.0, -3.0])
    out = jaxdp.laplace(jax.random.key(0), values, epsilon=eps, sensitivity=sens, shape=(N, 3))
    assert out.shape == (N, 3)
    for j in range(3):
        cdf = scipy.stats.laplace(loc=float(values[j]), scale=sens / eps).cdf
        assert_matches_cdf(out[:, j], cdf)
    with pytest.raises(AssertionError):  # a scale off by 5% is caught
        assert_matches_cdf(out[:, 0], scipy.stats.laplace(scale=1.05 * sens / eps).cdf)


@pytest.mark.parametrize(
    "eps,delta,sens", [(1.0, 1e-5, 1.0), (0.1, 1e-6, 3.0), (4.0, 1e-3, 0.5), (20.0, 1e-12, 1.0)]
)
def test_analytic_sigma_matches_scipy_root(eps, delta, sens):
    expected = analytic_gaussian_sigma(eps, delta, sens)
    got = jaxdp_sigma(eps, delta, sens)
    assert got >= expected * (1 - 1e-9)  # never less noise than required
    np.testing.assert_allclose(got, expected, rtol=1e-8)


def test_analytic_sigma_known_value_and_extremes():
    # Balle & Wang (2018): at eps = 1, delta = 1e-5, sigma ~ 3.73 (classical: 4.84).
    np.testing.assert_allclose(jaxdp_sigma(1.0, 1e-5, 1.0), 3.7306, rtol=1e-4)
    for eps, delta in [(1e-4, 1e-5), (100.0, 1e-300), (1e3, 0.5)]:
        s = jaxdp_sigma(eps, delta, 1.0)
        assert np.isfinite(s) and s > 0


@pytest.mark.parametrize("eps,delta,sens", [(1.0, 1e-5, 1.0), (0.5, 1e-8, 2.0)])
def test_gaussian_law(eps, delta, sens):
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    out = jaxdp.gaussian(
        jax.random.key(1), jnp.array(2.0), epsilon=eps, delta=delta, sensitivity=sens, shape=(N,)
    )
    assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=sigma).cdf)
    with pytest.raises(AssertionError):  # the classical, larger sigma is caught
        classical = sens * np.sqrt(2 * np.log(1.25 / delta)) / eps
        assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=classical).cdf)
    with pytest.raises(AssertionError):
        assert_matches_cdf(out, scipy.stats.norm(loc=2.0, scale=0.97 * sigma).cdf)


def test_gaussian_traced_sigma_matches_concrete():
    f = jax.jit(functools.partial(jaxdp.gaussian, jax.random.key(2), jnp.zeros(4), sensitivity=1.0))
    traced = f(epsilon=1.0, delta=1e-5)
    concrete = jaxdp.gaussian(
        jax.random.key(2), jnp.zeros(4), epsilon=1.0, delta=1e-5, sensitivity=1.0
    )
    np.testing.assert_allclose(traced, concrete, rtol=1e-4)


def test_gaussian_vmap_over_epsilon():
    eps = jnp.array([0.5, 1.0, 2.0])
    out = jax.vmap(
        lambda e: jaxdp.gaussian(
            jax.random.key(3),
            jnp.zeros(()),
            epsilon=e,
            delta=1e-5,
            sensitivity=1.0,
            shape=(50_000,),
        )
    )(eps)
    for i, e in enumerate([0.5, 1.0, 2.0]):
        sigma = analytic_gaussian_sigma(e, 1e-5, 1.0)
        assert_matches_cdf(out[i], scipy.stats.norm(scale=sigma).cdf)


# ----------------------------------------------------------------------------- finite precision

from fractions import Fraction  # noqa: E402

from jax.experimental import checkify  # noqa: E402

from jaxdp._additive import PrecisionWarning, _analytic_sigma_traced, _sigma_up  # noqa: E402


def _round_fraction(exact) -> np.float32:
    """The float32 nearest to the rational ``exact``, ties to even."""
    c = np.float32(float(exact))
    cands = [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    gaps = [abs(Fraction(float(x)) - exact) for x in cands]
    best = [x for x, g in zip(cands, gaps, strict=True) if g == min(gaps)]
    if len(best) > 1:
        best = [x for x in best if not int(np.float32(x).view(np.uint32)) & 1]
    return best[0]


def _rounded_sum(values, noise) -> np.ndarray:
    """float32 of the exact real ``values + noise`` (float64 arrays), ties to even."""
    out = [
        _round_fraction(Fraction(float(v)) + Fraction(float(z)))
        for v, z in zip(np.ravel(values), np.ravel(noise), strict=True)
    ]
    return np.asarray(out, np.float32).reshape(np.shape(noise))


@pytest.mark.parametrize("fn", ["laplace", "gaussian"])
def test_noise_below_the_spacing_warns_and_never_raises(fn):
    # Data never raise: a value whose float32 spacing exceeds 2**-10 of the noise
    # scale warns, and its release is the exact sum rounded (a post-processing).
    kw = dict(epsilon=1.1, sensitivity=1.0) | ({"delta": 1e-5} if fn == "gaussian" else {})
    f = getattr(jaxdp, fn)
    key = jax.random.key(0)
    with pytest.warns(
        PrecisionWarning, match=r"values = 999999995904\.0 .*spacing 65536\.0.*noise"
    ):
        out = f(key, jnp.float32(1e12), shape=(5,), **kw)
    noise = np.asarray(f(key, jnp.float32(0.0), shape=(5,), **kw), np.float64)
    np.testing.assert_array_equal(out, _rounded_sum(np.full(5, 1e12, np.float32), noise))
    # neighbouring counts on either side of the resolution (2**14: spacing 2**-9 at
    # scale 1) both release, eagerly and under jit: no exception, no NaN
    kw1 = kw | {"epsilon": 1.0}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pair = [f(key, jnp.float32(c), **kw1) for c in (16383.0, 16384.0)]
    assert np.all(np.isfinite(pair))
    if fn == "laplace":  # spacing 2**-10 then 2**-9 at scale 1: only the second warns
        assert [w.category for w in seen] == [PrecisionWarning]
    checked = checkify.checkify(
        jax.jit(lambda v: f(jax.random.key(0), v, **kw)), errors=checkify.user_checks
    )
    err, out = checked(jnp.array([1e12, 16384.0, 3.0]))
    assert err.get() is None and np.all(np.isfinite(out))
    err, out = checked(jnp.array([jnp.nan, 3.0]))  # a traced NaN value is reported
    assert "values must be finite" in str(err.get()) and np.isnan(out[0])


@pytest.mark.parametrize("fn", ["laplace", "gaussian"])
@pytest.mark.parametrize(
    "value",
    [
        np.int64(2**31 + 100),
        np.int64(2**40 + 2**15 + 3),
        np.float64(1e9 + 20.3),
        -(2.0**45) - 2**20 - 1.5,
    ],
)
def test_wide_host_values_are_summed_exactly(fn, value):
    # float64 and int64 host values (x64 off) are not rounded to float32 first where
    # the noise is finer than float32's spacing: the release is their exact sum with
    # the noise, rounded once (int64 was wrapped modulo 2**32 by jnp.asarray: 2**31 +
    # 100 became -2**31 + 100). The noise scale here is about the spacing.
    spacing = float(np.spacing(np.float32(abs(float(value)))))
    kw = dict(epsilon=1.0, sensitivity=spacing) | ({"delta": 0.3} if fn == "gaussian" else {})
    f = getattr(jaxdp, fn)
    key = jax.random.key(3)
    with pytest.warns(PrecisionWarning):
        out = np.asarray(f(key, value, shape=(1000,), **kw))
    noise = np.asarray(f(key, 0.0, shape=(1000,), **kw), np.float64)
    np.testing.assert_array_equal(out, _rounded_sum(np.full(1000, float(value)), noise))
    # rounding the value to float32 first gives other releases (the test can fail)
    entry = np.float32(float(value)).astype(np.float64)
    assert np.any(_rounded_sum(np.full(1000, entry), noise) != out)


def test_exact_sum_is_the_correctly_rounded_sum():
    # float32 parts of int64 values at float32 midpoints (2**30 to 2**62), of float64
    # values, with noise at every scale and cancelling the value, against rationals
    from jaxdp._additive import _exact_sum, _split

    rng = np.random.default_rng(4)
    vals, noise = [], []
    for k in range(30, 63, 4):
        ulp = 2 ** (k - 24)
        for _ in range(150):
            mid = int(rng.integers(2 ** (k - 1), 2**k)) // ulp * ulp + ulp // 2
            vals.append((mid + int(rng.integers(-3, 4))) * int(rng.choice([-1, 1])))
            noise.append(rng.laplace() * 10.0 ** rng.uniform(-3, 3) * rng.choice([1, ulp]))
    x = rng.uniform(-1, 1, 1500) * 10.0 ** rng.uniform(-15, 25, 1500)
    z = x * 10.0 ** rng.uniform(-25, 1, 1500)
    z[::3] = -x[::3]  # cancellation
    vals += list(x)
    noise = np.concatenate([np.asarray(noise), z]).astype(np.float32)
    parts = [
        np.concatenate(a)
        for a in zip(_split(np.array(vals[:-1500], dtype=object)), _split(x), strict=True)
    ]
    out = np.asarray(jax.jit(_exact_sum)(*parts, noise))
    exact = [Fraction(v) + Fraction(float(n)) for v, n in zip(vals, noise, strict=True)]
    np.testing.assert_array_equal(out, [_round_fraction(e) for e in exact])
    # 48 bits (hi + mid, no lo) misround some of them: the test can fail
    short = np.asarray(jax.jit(_exact_sum)(parts[0], parts[1], 0 * parts[2], noise))
    assert np.any(short != out)


def test_neighbours_at_a_float32_midpoint_of_int64():
    # c = M - 1 and M + 0, M a float32 midpoint at 2**52: the exact release rounds
    # down with probability 1 - e**-1/2 and 1/2 (ties to even); a 48-bit value
    # rounded c + 1 onto M + 2**4 and put the ratio near e**16.
    k, n = 52, 100_000
    m = 2**k + 2 ** (k - 24)
    down = []
    for c in (m - 1, m):
        with pytest.warns(PrecisionWarning):  # the noise is far below the spacing
            out = jaxdp.laplace(
                jax.random.key(2), np.int64(c), epsilon=1.0, sensitivity=1.0, shape=(n,)
            )
        down.append(np.mean(np.asarray(out, np.float64) == 2.0**k))
    for got, want in zip(down, (1 - np.exp(-1) / 2, 0.5), strict=True):
        assert abs(got - want) < 5 * np.sqrt(want * (1 - want) / n), (got, want)


def test_laplace_large_but_resolved_value_keeps_its_law():
    # 4000 with scale 1: float32 spacing 2**-12 <= 2**-10: computed, with the right law
    out = jaxdp.laplace(
        jax.random.key(5), jnp.float32(4000.0), epsilon=1.0, sensitivity=1.0, shape=(N,)
    )
    assert_matches_cdf(out, scipy.stats.laplace(loc=4000.0, scale=1.0).cdf)
    with pytest.raises(AssertionError):
        assert_matches_cdf(out, scipy.stats.laplace(loc=4000.0, scale=1.05).cdf)
    with pytest.warns(PrecisionWarning, match="spacing"):  # 2**14: spacing 2**-9 > 2**-10
        jaxdp.laplace(jax.random.key(5), jnp.float32(2.0**14), epsilon=1.0, sensitivity=1.0)


def test_granular_grid_beyond_float32_warns_and_rounds_the_exact_point():
    key, gamma = jax.random.key(0), 2.0**-8
    kw = dict(epsilon=1.0, sensitivity=1.0, granularity=gamma, shape=(300,))
    with pytest.warns(PrecisionWarning, match="does not fit the grid"):
        out = jaxdp.laplace(key, jnp.float32(3e5), **kw)
    steps = np.asarray(jaxdp.laplace(key, jnp.float32(0.0), **kw), np.float64)  # gamma * K
    np.testing.assert_array_equal(out, _rounded_sum(np.full(300, 3e5), steps))
    with pytest.warns(PrecisionWarning):  # no overflow of values / granularity either
        tiny = {"granularity": 2.0**-100, "sensitivity": 2.0**-100}
        huge = jaxdp.laplace(key, jnp.float32(3e38), **kw | tiny)
    assert np.all(np.isfinite(huge))


def test_granular_rounding_is_to_the_nearest_grid_point():
    # x = γ(1/2 - 2**-25) is nearest to the grid point 0; floor(x/γ + 1/2) rounded
    # the sum up to 1 in float32 and put it one step up.
    key, gamma = jax.random.key(1), 2.0**-4
    kw = dict(epsilon=1.0, sensitivity=gamma, granularity=gamma, shape=(4,))
    x = np.float32(gamma * (0.5 - 2.0**-25))
    base = np.asarray(jaxdp.laplace(key, jnp.float32(0.0), **kw), np.float64)  # γK
    np.testing.assert_array_equal(np.asarray(jaxdp.laplace(key, x, **kw), np.float64), base)
    assert np.floor(np.float32(x / gamma) + np.float32(0.5)) == 1  # the old rounding


def test_granular_grid_is_exact():
    y = jaxdp.laplace(
        jax.random.key(0),
        jnp.float32(3e5),
        epsilon=1.0,
        sensitivity=1.0,
        granularity=2.0**-2,
        shape=(1000,),
    )
    assert np.all(np.asarray(y) * 4 == np.round(np.asarray(y) * 4))
    assert len(np.unique(np.asarray(y))) > 10  # the noise is there


EPS_GRID = [0.01, 0.1, 0.5, 1.0, 3.0, 10.0]
DELTA_GRID = [1e-12, 1e-8, 1e-5, 1e-3, 0.1]


def test_gaussian_traced_sigma_never_below_analytic_minimum():
    e, d = np.meshgrid(EPS_GRID, DELTA_GRID, indexing="ij")
    e32, d32 = np.float32(e.ravel()), np.float32(d.ravel())
    for sens in (0.5, 1.0, 7.0):
        traced = jax.jit(
            jax.vmap(lambda a, b, s=sens: _analytic_sigma_traced(a, b, jnp.float32(s)))
        )(jnp.asarray(e32), jnp.asarray(d32))
        traced = np.asarray(traced, np.float64)
        exact = np.array(
            [
                analytic_gaussian_sigma(float(a), float(b), sens)
                for a, b in zip(e32, d32, strict=True)
            ]
        )
        assert np.all(traced >= exact), np.min(traced / exact - 1)
        assert np.all(traced <= exact * (1 + 2.0**-21))
        concrete = _sigma_up(e32, d32, sens, np.float32).astype(np.float64)
        np.testing.assert_array_equal(concrete, traced)  # identical paths
    # and a deliberately rounded-to-nearest sigma is caught by the same check
    nearest = np.float32(exact).astype(np.float64)
    assert np.any(nearest < exact)


def test_gaussian_small_epsilon_traced_matches_law():
    # small epsilon: where the float32 bisection used to come out ~1% low
    eps, delta = 0.002, 1e-20
    f = jax.jit(
        lambda e: jaxdp.gaussian(
            jax.random.key(6), jnp.zeros(()), epsilon=e, delta=delta, sensitivity=1.0, shape=(N,)
        )
    )
    out = f(eps)
    sigma = jaxdp_sigma(float(np.float32(eps)), float(np.float32(delta)), 1.0)
    assert_matches_cdf(out, scipy.stats.norm(scale=sigma).cdf)
    with pytest.raises(AssertionError):
        assert_matches_cdf(out, scipy.stats.norm(scale=0.97 * sigma).cdf)


# ----------------------------------------------------------------------------- pytrees, dtype


def test_pytree_noise_per_leaf_with_split_keys():
    key = jax.random.key(7)
    tree = {"a": jnp.zeros((N,)), "b": (jnp.ones((N // 2,)), jnp.full((3,), 2.0))}
    out = jaxdp.laplace(key, tree, epsilon=1.0, sensitivity=2.0)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(tree)
    keys = jax.random.split(key, 3)
    leaves = jax.tree_util.tree_leaves(tree)
    for k, leaf, got in zip(keys, leaves, jax.tree_util.tree_leaves(out), strict=True):
        want = jaxdp.laplace(k, leaf, epsilon=1.0, sensitivity=2.0)
        np.testing.assert_array_equal(got, want)
    assert_matches_cdf(out["a"], scipy.stats.laplace(scale=2.0).cdf)
    assert_matches_cdf(out["b"][0], scipy.stats.laplace(loc=1.0, scale=2.0).cdf)
    with pytest.raises(AssertionError):
        assert_matches_cdf(out["a"], scipy.stats.laplace(scale=2.1).cdf)
    jitted = jax.jit(lambda t: jaxdp.laplace(key, t, epsilon=1.0, sensitivity=2.0))(tree)
    np.testing.assert_array_equal(jitted["a"], out["a"])
    g = jaxdp.gaussian(key, tree, epsilon=1.0, delta=1e-5, sensitivity=1.0)
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert_matches_cdf(g["a"], scipy.stats.norm(scale=sigma).cdf)
    with pytest.raises(ValueError, match="shape must be None"):
        jaxdp.laplace(key, tree, epsilon=1.0, sensitivity=1.0, shape=(2,))


def test_dtype_follows_input_and_can_be_overridden():
    key = jax.random.key(8)
    bf = jnp.zeros((N,), jnp.bfloat16)
    out = jaxdp.laplace(key, bf, epsilon=1.0, sensitivity=1.0)
    assert out.dtype == jnp.bfloat16
    # bfloat16 rounding of Lap(1): compare with the exact law rounded to bfloat16 cells
    x = np.asarray(out, np.float64)
    grid = np.unique(x)
    probs = np.diff(
        scipy.stats.laplace.cdf(np.concatenate([[-np.inf], (grid[1:] + grid[:-1]) / 2, [np.inf]]))
    )
    from laws import assert_matches_law

    assert_matches_law(np.searchsorted(grid, x), probs)
    with pytest.raises(AssertionError):
        wrong = np.diff(
            scipy.stats.laplace(scale=1.1).cdf(
                np.concatenate([[-np.inf], (grid[1:] + grid[:-1]) / 2, [np.inf]])
            )
        )
        assert_matches_law(np.searchsorted(grid, x), wrong)
    assert jaxdp.laplace(key, bf, epsilon=1.0, sensitivity=1.0, dtype=jnp.float32).dtype == (
        jnp.float32
    )
    assert jaxdp.laplace(key, jnp.arange(3), epsilon=1.0, sensitivity=1.0).dtype == jnp.float32
    assert (
        jaxdp.gaussian(
            key, jnp.zeros(2, jnp.float16), epsilon=1.0, delta=1e-5, sensitivity=1.0
        ).dtype
        == jnp.float16
    )
    # bfloat16 has 8 significant bits: a value of 1 with scale 1 would lose the noise
    with pytest.warns(PrecisionWarning, match="float16 spacing"):  # beyond float16's range
        jaxdp.laplace(key, jnp.float32(7e4), epsilon=1.0, sensitivity=1.0, dtype=jnp.float16)
    with pytest.warns(PrecisionWarning, match="bfloat16 spacing"):
        jaxdp.laplace(key, jnp.ones(2, jnp.bfloat16), epsilon=1.0, sensitivity=1.0)
    ok = jaxdp.laplace(
        key, jnp.ones(2, jnp.bfloat16), epsilon=1.0, sensitivity=1.0, dtype=jnp.float32
    )
    assert ok.dtype == jnp.float32
    with pytest.raises(ValueError, match="dtype must be a floating dtype"):
        jaxdp.laplace(key, bf, epsilon=1.0, sensitivity=1.0, dtype=jnp.int32)


def _granular_noise_law(steps):
    """The exact law of one ``floor(E * steps)`` as ``jaxdp._random.discrete_laplace``
    computes it in float32 (E = -log v, v an open 32-bit uniform): the number of
    the 2**32 words giving each value, found by bisection (the map is monotone)."""
    scale = jnp.float32(steps)

    @jax.jit
    def g_of(words):
        return jnp.floor(-jnp.log(_random._unit(words, 32, np.dtype(np.float32))) * scale)

    sample = np.sort(np.random.default_rng(0).integers(0, 2**32, 2**16, dtype=np.uint64))
    assert np.all(np.diff(np.asarray(g_of(jnp.asarray(sample.astype(np.uint32))))) <= 0)
    gs = np.arange(int(g_of(jnp.zeros(1, jnp.uint32))[0]) + 2)
    lo, hi = np.zeros(len(gs), np.int64), np.full(len(gs), 2**32, np.int64)
    for _ in range(33):  # first word whose value is below g
        mid = (lo + hi) // 2
        val = np.asarray(g_of(jnp.asarray(np.minimum(mid, 2**32 - 1).astype(np.uint32))))
        at_least = (val >= gs) & (mid < 2**32)
        lo, hi = np.where(at_least, mid + 1, lo), np.where(at_least, hi, mid)
    assert lo[0] == 2**32 and lo[-1] == 0
    return (lo[:-1] - lo[1:]) / 2.0**32


@pytest.mark.parametrize(
    "eps, n_steps, delta", [(1.0, 1, 1e-9), (1.0, 100, 1e-9), (5.0, 1000, 6e-8)]
)
def test_granular_laplace_implemented_law_matches_the_docstring(eps, n_steps, delta):
    """The implemented law of K = g0 - g1, computed exactly from the float32 code:
    within e**(+-6.3e-6) of the discrete Laplace for |k| <= 10 s, and the
    hockey-stick divergence between K and K + N at eps + 1e-5 below the
    docstring's delta (SECURITY.md, "laplace(granularity=γ)")."""
    s = n_steps / eps
    p = _granular_noise_law(s)
    pk = np.convolve(p, p[::-1])  # K = g0 - g1, index k + G
    big_g = len(p) - 1
    k = np.arange(-big_g, big_g + 1)
    q = np.exp(-1 / s)
    exact = (1 - q) / (1 + q) * q ** np.abs(k)
    near = np.abs(k) <= 10 * s
    assert np.max(np.abs(np.log(pk[near] / exact[near]))) <= 6.3e-6
    shifted = np.zeros_like(pk)
    shifted[n_steps:] = pk[:-n_steps]  # P[K + N = k]
    hockey = np.sum(np.maximum(0.0, pk - np.exp(eps + 1e-5) * shifted))
    assert 0 < hockey <= delta
