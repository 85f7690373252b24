"""private_quantiles (joint exponential mechanism) against exact float64 laws by
enumeration of interval tuples, computed independently here in NumPy."""

from __future__ import annotations

import itertools
import math

import chex
import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from jax.experimental import checkify
from laws import assert_matches_cdf, assert_matches_law

import jaxdp
from jaxdp import _quantiles

KEY = jax.random.key(0)
DRAWS = 200_000


# ----------------------------------------------------------------------------- exact law


def joint_law(data, qs, epsilon, lo, hi, sensitivity=None):
    """Every non-decreasing tuple of interval indices and its probability, float64.

    Interval i = [x_(i), x_(i+1)) of the clipped, sorted data with x_(0) = lo and
    x_(n+1) = hi holds points with i data points below. A tuple's mass is
    exp(eps u / (2 Delta)) times the volume of the sorted simplex it covers,
    prod over runs of L**r / r!.
    """
    x = np.sort(np.clip(np.asarray(data, np.float64), lo, hi))
    n = len(x)
    edges = np.concatenate([[lo], x, [hi]])
    lengths = np.diff(edges)
    q = np.asarray(qs, np.float64)
    g = np.diff(np.concatenate([[0.0], q, [1.0]]))
    delta = 2 * (1 - g.min()) if sensitivity is None else sensitivity
    tuples, logw = [], []
    for tup in itertools.combinations_with_replacement(range(n + 1), len(q)):
        idx = np.concatenate([[0], tup, [n]])
        u = -np.abs(np.diff(idx) - g * n).sum()
        runs = [len(list(grp)) for _, grp in itertools.groupby(tup)]
        with np.errstate(divide="ignore"):
            vol = sum(np.log(lengths[list(tup)])) - sum(math.lgamma(r + 1) for r in runs)
        tuples.append(tup)
        logw.append(epsilon * u / (2 * delta) + vol)
    logw = np.asarray(logw)
    return tuples, np.exp(logw - scipy.special.logsumexp(logw)), edges


def tuple_ids(draws, tuples, edges):
    """Maps sorted draws (S, m) to the index of their interval tuple."""
    d = np.asarray(draws, np.float64)
    idx = np.searchsorted(edges, d, side="right") - 1
    idx = np.clip(idx, 0, len(edges) - 2)
    base = len(edges) - 1
    weights = base ** np.arange(idx.shape[-1])
    codes = np.array([np.dot(t, weights) for t in tuples])
    order = np.argsort(codes)
    pos = np.searchsorted(codes[order], idx @ weights)
    assert np.all(codes[order][np.clip(pos, 0, len(codes) - 1)] == idx @ weights)
    return order[pos]


def marginal_cdf(tuples, probs, edges, j):
    """Exact CDF of the j-th sorted output: within a run of r points in an interval
    of length L, the k-th of them is lo + L * Beta(k, r - k + 1)."""
    parts = []
    for t, p in zip(tuples, probs, strict=True):
        if p == 0:
            continue
        i = t[j]
        first = t.index(i)
        r = t.count(i)
        k = j - first + 1
        parts.append((p, edges[i], edges[i + 1] - edges[i], k, r - k + 1))

    def cdf(x):
        x = np.asarray(x, np.float64)
        out = np.zeros_like(x)
        for p, a, w, al, be in parts:
            out += p * scipy.stats.beta.cdf(np.clip((x - a) / w, 0, 1), al, be)
        return out

    return cdf


def interval_marginal(tuples, probs, j, n_int):
    out = np.zeros(n_int)
    for t, p in zip(tuples, probs, strict=True):
        out[t[j]] += p
    return out


# ----------------------------------------------------------------------------- laws

DATA_TIES = np.array([1.0, 2.0, 2.0, 3.5, 7.0])  # a tie: a zero-length interval


@pytest.mark.parametrize(
    "qs, eps", [((0.25, 0.5, 0.75), 2.0), ((0.1, 0.9), 0.7), ((0.5, 0.5), 3.0)]
)
def test_tuple_law_by_enumeration(qs, eps):
    lo, hi = 0.0, 10.0
    draws = jaxdp.private_quantiles(
        KEY, DATA_TIES, jnp.array(qs), epsilon=eps, bounds=(lo, hi), shape=(DRAWS,)
    )
    assert draws.shape == (DRAWS, len(qs)) and draws.dtype == jnp.float32
    d = np.asarray(draws)
    assert np.all(np.diff(d, axis=-1) >= 0) and d.min() >= lo and d.max() <= hi
    tuples, probs, edges = joint_law(DATA_TIES, qs, eps, lo, hi)
    ids = tuple_ids(d, tuples, edges)
    assert_matches_law(ids, probs)
    wrong_delta = 2.0 if min(qs) > 0 and qs[0] != qs[-1] else 1.0  # swap's 2, else 1
    with pytest.raises(AssertionError):  # a wrong sensitivity is caught
        assert_matches_law(ids, joint_law(DATA_TIES, qs, eps, lo, hi, wrong_delta)[1])
    with pytest.raises(AssertionError):  # forgetting the 1/r! of runs is caught
        _, p_wrong, _ = joint_law(DATA_TIES, qs, eps, lo, hi)
        runs = np.array([max(len(list(g)) for _, g in itertools.groupby(t)) for t in tuples])
        p_wrong = p_wrong * scipy.special.factorial(runs)
        assert_matches_law(ids, p_wrong / p_wrong.sum())


def test_marginals_chi_square_and_ks():
    rng = np.random.default_rng(1)
    data = np.round(rng.normal(5.0, 2.0, size=24), 1)  # ties from rounding
    qs, eps, lo, hi = (0.2, 0.5, 0.8), 1.5, 0.0, 10.0
    draws = np.asarray(
        jaxdp.private_quantiles(
            KEY, data, jnp.array(qs), epsilon=eps, bounds=(lo, hi), shape=(DRAWS,)
        )
    )
    tuples, probs, edges = joint_law(data, qs, eps, lo, hi)
    idx = np.clip(np.searchsorted(edges, draws, side="right") - 1, 0, len(edges) - 2)
    for j in range(len(qs)):
        assert_matches_law(idx[:, j], interval_marginal(tuples, probs, j, len(edges) - 1))
        assert_matches_cdf(draws[::20, j], marginal_cdf(tuples, probs, edges, j))
    with pytest.raises(AssertionError):
        _, wrong, _ = joint_law(data, qs, 0.8 * eps, lo, hi)
        assert_matches_law(idx[:, 1], interval_marginal(tuples, wrong, 1, len(edges) - 1))


def smith_tight_cdf(data, q, eps, lo, hi):
    """private_quantile's law with the tight add/remove sensitivity max(q, 1 - q):
    density ∝ exp(-eps |#{x < r} - q n| / (2 max(q, 1 - q))) on [lo, hi]."""
    x = np.sort(np.clip(np.asarray(data, np.float64), lo, hi))
    n = len(x)
    edges = np.concatenate([[lo], x, [hi]])
    w = np.diff(edges)
    with np.errstate(divide="ignore"):
        logm = -eps * np.abs(np.arange(n + 1) - q * n) / (2 * max(q, 1 - q)) + np.log(w)
    mass = np.exp(logm - logm.max())
    before = np.concatenate([[0.0], np.cumsum(mass)])
    dens = np.where(w > 0, mass / np.where(w > 0, w, 1), 0)

    def cdf(r):
        r = np.clip(np.asarray(r, np.float64), lo, hi)
        j = np.clip(np.searchsorted(edges, r, side="right") - 1, 0, n)
        return (before[j] + dens[j] * (r - edges[j])) / mass.sum()

    return cdf


# MERGE(issue 13 item 4): m = 1 is private_quantile with the tight sensitivity
# max(q, 1 - q). This compares with that law computed here in NumPy; once the
# lead's private_quantile lands, also compare draws of both functions directly.
@pytest.mark.parametrize("q", [0.5, 0.3, 0.9])
def test_single_quantile_is_smith_with_tight_sensitivity(q):
    data, eps, lo, hi = DATA_TIES, 1.2, 0.0, 10.0
    draws = jaxdp.private_quantiles(
        KEY, data, jnp.array([q]), epsilon=eps, bounds=(lo, hi), shape=(DRAWS,)
    )
    assert draws.shape == (DRAWS, 1)
    assert_matches_cdf(draws[:, 0], smith_tight_cdf(data, q, eps, lo, hi))
    with pytest.raises(AssertionError):  # the loose sensitivity 1 is caught
        assert_matches_cdf(draws[:, 0], smith_tight_cdf(data, q, eps * max(q, 1 - q), lo, hi))


def test_empty_data_is_sorted_uniform():
    draws = jaxdp.private_quantiles(
        KEY, jnp.zeros((0,)), jnp.array([0.3, 0.6]), epsilon=1.0, bounds=(-1.0, 3.0), shape=(DRAWS,)
    )
    d = np.asarray(draws, np.float64)
    assert np.all(np.isfinite(d)) and np.all(d[:, 0] <= d[:, 1])
    # the minimum and maximum of two uniforms on [-1, 3]
    assert_matches_cdf(d[:, 0], lambda x: 1 - (1 - np.clip((x + 1) / 4, 0, 1)) ** 2)
    assert_matches_cdf(d[:, 1], lambda x: np.clip((x + 1) / 4, 0, 1) ** 2)
    with pytest.raises(AssertionError):
        assert_matches_cdf(d[:, 0], lambda x: np.clip((x + 1) / 4, 0, 1))


def test_data_outside_bounds_is_clipped_and_all_equal_data():
    data = np.array([-50.0, 0.5, 0.5, 0.5, 90.0])
    draws = jaxdp.private_quantiles(
        KEY, data, jnp.array([0.5, 0.75]), epsilon=2.0, bounds=(0.0, 1.0), shape=(DRAWS,)
    )
    tuples, probs, edges = joint_law(data, (0.5, 0.75), 2.0, 0.0, 1.0)
    assert_matches_law(tuple_ids(draws, tuples, edges), probs)


def test_large_n_is_finite_and_accurate():
    data = jnp.linspace(0.0, 1.0, 20_001)
    qs = jnp.array([0.1, 0.5, 0.9])
    o = jaxdp.private_quantiles(KEY, data, qs, epsilon=1.0, bounds=(0.0, 1.0), shape=(2,))
    assert np.all(np.isfinite(np.asarray(o)))
    assert np.max(np.abs(np.asarray(o) - np.asarray(qs))) < 0.01


# ----------------------------------------------------------------------------- JAX behaviour


def test_jit_equals_eager_and_same_key_repeats():
    data, qs = jnp.asarray(DATA_TIES), jnp.array([0.3, 0.7])
    kw = dict(epsilon=1.0, bounds=(0.0, 10.0), shape=(50,))
    eager = jaxdp.private_quantiles(KEY, data, qs, **kw)
    jitted = jax.jit(lambda k, x: jaxdp.private_quantiles(k, x, qs, **kw))(KEY, data)
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(eager, jaxdp.private_quantiles(KEY, data, qs, **kw))
    assert not np.array_equal(eager, jaxdp.private_quantiles(jax.random.key(1), data, qs, **kw))


def test_vmap_over_epsilon_compiles_once():
    data, qs = jnp.asarray(DATA_TIES), jnp.array([0.3, 0.7])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(eps):
        return jaxdp.private_quantiles(KEY, data, qs, epsilon=eps, bounds=(0.0, 10.0))

    grid = jnp.array([0.1, 1.0, 10.0])
    out = jax.vmap(run)(grid)
    out2 = jax.vmap(run)(grid * 2)
    assert out.shape == out2.shape == (3, 2)
    # an epsilon array in one call is the same as the batch
    direct = jaxdp.private_quantiles(KEY, data, qs, epsilon=grid, bounds=(0.0, 10.0))
    assert direct.shape == (3, 2) and np.all(np.isfinite(np.asarray(direct)))


def test_shape_semantics_and_batched_rows():
    rng = np.random.default_rng(2)
    data = rng.uniform(0, 1, size=(3, 7))
    qs = jnp.array([0.25, 0.75])
    out = jaxdp.private_quantiles(KEY, data, qs, epsilon=1.0, bounds=(0, 1))
    assert out.shape == (3, 2)
    out = jaxdp.private_quantiles(KEY, data, qs, epsilon=1.0, bounds=(0, 1), shape=(5, 3))
    assert out.shape == (5, 3, 2)
    out = jaxdp.private_quantiles(KEY, data[0], qs, epsilon=jnp.ones(4), bounds=(0, 1))
    assert out.shape == (4, 2)
    with pytest.raises(ValueError, match="shape"):
        jaxdp.private_quantiles(KEY, data, qs, epsilon=1.0, bounds=(0, 1), shape=(4,))
    # batched rows: row 1's law equals the one-row law
    many = jaxdp.private_quantiles(KEY, data, qs, epsilon=2.0, bounds=(0, 1), shape=(DRAWS // 4, 3))
    tuples, probs, edges = joint_law(data[1], (0.25, 0.75), 2.0, 0.0, 1.0)
    assert_matches_law(tuple_ids(many[:, 1], tuples, edges), probs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(bounds=(1.0, 0.0)), "bounds"),
        (dict(bounds=(0.0, float("inf"))), "bounds"),
        (dict(qs=jnp.array([0.5, 0.2])), "non-decreasing"),
        (dict(qs=jnp.array([0.5, 1.2])), "qs"),
        (dict(qs=jnp.zeros((0,))), "qs"),
        (dict(qs=jnp.array([[0.5]])), "qs"),
        (dict(data=jnp.array([1.0, jnp.nan])), "data"),
        (dict(data=jnp.array(1.0)), "data"),
        (dict(shape=(-1,)), "shape"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(data=jnp.asarray(DATA_TIES), qs=jnp.array([0.5]), epsilon=1.0, bounds=(0.0, 10.0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        jaxdp.private_quantiles(KEY, args.pop("data"), args.pop("qs"), **args)


def test_batched_key_raises():
    with pytest.raises(ValueError, match="vmap"):
        jaxdp.private_quantiles(
            jax.random.split(KEY, 2), DATA_TIES, jnp.array([0.5]), epsilon=1.0, bounds=(0, 10)
        )


def test_traced_invalid_input_gives_nan_and_checkify_reports():
    def f(eps, data):
        return jaxdp.private_quantiles(KEY, data, jnp.array([0.5]), epsilon=eps, bounds=(0, 10))

    out = jax.jit(f)(-1.0, jnp.asarray(DATA_TIES))
    assert np.all(np.isnan(np.asarray(out)))
    out = jax.jit(f)(1.0, jnp.array([1.0, jnp.nan]))
    assert np.all(np.isnan(np.asarray(out)))
    # an infinite data point is beyond the bounds, like any other: clipped, not NaN
    out = jax.jit(f)(1.0, jnp.array([1.0, jnp.inf]))
    np.testing.assert_array_equal(out, jax.jit(f)(1.0, jnp.array([1.0, 10.0])))
    err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(-1.0, DATA_TIES)
    assert "epsilon" in str(err.get())


def test_legacy_key_and_integer_data():
    out = jaxdp.private_quantiles(
        jax.random.PRNGKey(0), jnp.arange(10), jnp.array([0.5]), epsilon=1.0, bounds=(0, 10)
    )
    assert out.shape == (1,) and out.dtype == jnp.float32


def test_exact_targets_compiled():
    """The targets g_j n (``_quantiles._targets``: exact integer part, fraction within
    6u) and the gaps |d - g_j n| read from them, as XLA compiles them inside ``jit``
    (where fused multiply-add contraction could break Dekker's product), against exact
    rational arithmetic, for n up to 10**9: n above 2**24 is not a float32, and
    rounding it (as the code before did) moves the targets by up to an integer."""
    import math
    from fractions import Fraction

    from jaxdp import _quantiles

    def exact(x):
        return Fraction(float(x))

    rng = np.random.default_rng(0)
    g = rng.uniform(0, 1, 512).astype(np.float32)
    g[:4] = [0.0, 1.0, 0.5, np.float32(1 / 3)]
    u = 2.0**-24
    for n in (7, 10**6, 2**24 + 1, 2**24 + 12345, 10**7 + 3, 2**27 - 1, 10**9 + 7):
        d = np.array(rng.integers(0, n + 1, g.size), np.int32)

        @jax.jit
        def gaps(g, d, n=n):
            whole, frac = _quantiles._targets(g, n)
            return whole, frac, _quantiles._gap(d, whole, frac)

        whole, frac, gap = (np.asarray(x) for x in gaps(jnp.asarray(g), jnp.asarray(d)))
        targets = [exact(gi) * n for gi in g]
        assert [int(w) for w in whole] == [math.floor(t) for t in targets], n
        for f, t in zip(frac, targets, strict=True):
            assert abs(exact(f) - (t - math.floor(t))) <= 6 * u, n
        exact_gaps = [abs(int(di) - t) for di, t in zip(d, targets, strict=True)]
        for x, e in zip(gap, exact_gaps, strict=True):
            assert abs(exact(x) - e) <= 6 * u + 2 * u * e, n
        if n > 2**24:
            # the float32 of before: n and d rounded to float32, far off
            old = np.abs(d.astype(np.float32).astype(np.float64) - np.float32(n) * g)
            assert max(abs(exact(o) - e) for o, e in zip(old, exact_gaps, strict=True)) > 0.4


def _count(jaxpr, name):
    """Equations named ``name`` in ``jaxpr`` and every sub-jaxpr."""
    return sum(
        (eqn.primitive.name == name)
        + sum(_count(s, name) for s in jax_core.jaxprs_in_params(eqn.params))
        for eqn in jaxpr.eqns
    )


def test_forward_level_is_one_scan_of_log_n_rounds():
    """Each level of the forward table runs its three log-semiring scans in one loop
    (a (3, N) stack): on a GPU that is a third of the sequential steps."""
    n_int, m = 1000, 4
    jaxpr = jax.make_jaxpr(_quantiles._forward)(
        jnp.zeros(n_int),
        jnp.float32(1.0),
        jnp.arange(m + 1, dtype=jnp.int32) * 100,
        jnp.zeros(m + 1),
    ).jaxpr
    # the levels' scan, and inside it one Hillis-Steele loop (a fori_loop: a scan)
    levels = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert len(levels) == 1
    assert (
        _count(levels[0].params["jaxpr"].jaxpr, "scan")
        + _count(levels[0].params["jaxpr"].jaxpr, "while")
        == 1
    )


# ----------------------------------------------------------------------------- float64 walk


def _reference_levels(log_len, s, g, n, m):
    """The forward table level by level, each level shifted by its own maximum, in
    NumPy longdouble (64-bit significand) by direct sums over every i' < i."""
    ld = np.longdouble
    log_len = np.asarray(log_len, ld)
    n_int = len(log_len)
    i = np.arange(n_int)
    t = np.asarray(g, ld) * n

    def lse(x, axis):
        top = np.max(x, axis=axis, keepdims=True)
        top = np.where(np.isfinite(top), top, 0)
        with np.errstate(divide="ignore"):
            return np.squeeze(top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)), axis)

    def shift(level):
        top = np.max(level)
        return level - (top if np.isfinite(top) else 0)

    level = np.full((n_int, m), -np.inf, ld)
    level[:, 0] = log_len - s * np.abs(i - t[0])
    level = shift(level)
    out = [level]
    for j in range(1, m):
        hat = lse(level, axis=-1)
        d = i[:, None] - i[None, :]  # (i, i')
        terms = np.where(d >= 1, hat[None, :] - s * np.abs(d - t[j]), -np.inf)
        new = np.full((n_int, m), -np.inf, ld)
        new[:, 0] = log_len + lse(terms, axis=-1)
        for r in range(2, m + 1):
            new[:, r - 1] = level[:, r - 2] + log_len - s * t[j] - np.log(ld(r))
        level = shift(new)
        out.append(level)
    return np.stack(out)


@pytest.mark.parametrize("eps", [1.0, 50.0])
def test_float64_table_within_its_stated_error(eps):
    """The table that private_quantiles walks (``_forward`` on float64 inputs, inside
    ``jax.enable_x64``, as ``_walk`` runs it) is within ``j e_t`` of a longdouble
    reference at level j, ``e_t`` the one-step error that ``_quantiles.guarantee``
    counts; the same table in float32 is not (it misses by orders of magnitude at
    ε n = 2.5e4: the float32 walk's ε + 1.2e-2)."""
    rng = np.random.default_rng(3)
    n, m, lo, hi = 500, 4, 0.0, 1.0
    data = np.sort(rng.uniform(lo, hi, n).astype(np.float32))
    data[100:110] = data[100]  # ties: zero-length intervals, never drawn
    edges = np.concatenate([[lo], data.astype(np.float64), [hi]])
    with np.errstate(divide="ignore"):
        log_len = np.log(np.diff(edges))
    qs = np.array([0.1, 0.4, 0.5, 0.9])
    g = np.diff(np.concatenate([[0.0], qs, [1.0]]))
    delta_u = g.sum() + 1 - 2 * g.min()
    s = eps / (2 * delta_u)
    ref = _reference_levels(log_len, s, g, n, m)

    # the stated one-step error: (V + ln N) c u, V from the guarantee's spread
    n_int = n + 1
    lam = math.log(hi - lo) - math.log(float(np.finfo(np.float32).smallest_subnormal))
    v = 2 * (eps / 2) * n + m * (lam + math.log(n_int * m) + math.log(m))
    c = 4 * math.ceil(math.log2(n_int)) + 12

    def errors(dtype, u):
        with jax.enable_x64(dtype == np.float64):
            gg = jnp.asarray(g, dtype)
            big_t, frac = _quantiles._targets(gg, n)
            table = _quantiles._forward(
                jnp.asarray(log_len, dtype), jnp.asarray(s, dtype), big_t, frac
            )
            table = np.asarray(table, np.longdouble)
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(np.isfinite(table), finite)
        e_t = (v + math.log(n_int)) * c * u
        diff = np.abs(np.where(finite, table, 0) - np.where(finite, ref, 0))
        per_level = np.max(diff, axis=(1, 2))
        return per_level, e_t * np.arange(1, m + 1)

    err64, bound64 = errors(np.float64, 2.0**-53)
    assert np.all(err64 <= bound64), (err64, bound64)
    err32, _ = errors(np.float32, 2.0**-24)
    assert np.max(err32) > 100 * np.max(bound64)  # the control: float32 is far outside


def test_walk_compiles_in_float64_with_float32_output():
    """The walk (logits, table, the kernel's weights) is float64 in the compiled
    program even with x64 off; the points keep the data's dtype."""
    data = jnp.linspace(0.0, 1.0, 50, dtype=jnp.float32)
    f = jax.jit(
        lambda k, x: jaxdp.private_quantiles(
            k, x, jnp.array([0.25, 0.75]), epsilon=1.0, bounds=(0.0, 1.0)
        )
    )
    assert not jax.config.jax_enable_x64
    hlo = f.lower(KEY, data).as_text()
    assert "f64" in hlo and "exponential" in hlo
    assert f(KEY, data).dtype == jnp.float32


def test_guarantee_within_targets():
    """``ε + 1e-5`` and ``δ' <= 1e-10`` per draw up to n = 10**6 and m = 20 at ε = 1; the
    stated growth with ε n m (passing 1e-5 near ε n m = 2.4e8 at n = 10**6)."""
    for n, m in [(10**3, 1), (10**3, 3), (10**5, 10), (10**6, 10), (10**6, 20)]:
        eps, delta = _quantiles.guarantee(n, m, 1.0, (0.0, 1.0))
        assert 1.0 < eps <= 1.0 + 1e-5 and 0 < delta <= 1e-10, (n, m, eps, delta)
    assert _quantiles.guarantee(10**6, 10, 23.0, (0.0, 1.0))[0] < 23.0 + 1e-5
    assert _quantiles.guarantee(10**6, 10, 25.0, (0.0, 1.0))[0] > 25.0 + 1e-5


@pytest.mark.parametrize("x64", [False, True])
def test_transformations_of_the_float64_walk(x64):
    """jit, checkify, remat and linearize give the eager draws; vmap over ε, data and
    keys give the rows' own draws; grad flows to the data through the points only.
    Inside a float64 kernel the transformations that run later (a vmap's
    batching rules, JVP, checkify) must still see float64 (pytest turns the
    truncation warning into an error)."""
    with jax.enable_x64(x64):
        x = jnp.asarray(np.random.default_rng(0).normal(size=(40,)))
        qs = jnp.array([0.25, 0.5, 0.75])

        def f(k, x, e=1.0):
            return jaxdp.private_quantiles(k, x, qs, epsilon=e, bounds=(-4.0, 4.0), shape=(5,))

        base = f(KEY, x)
        for out in (
            jax.jit(f)(KEY, x),
            checkify.checkify(jax.jit(f))(KEY, x)[1],
            jax.checkpoint(lambda x: f(KEY, x))(x),
            jax.linearize(lambda x: f(KEY, x), x)[0],
        ):
            np.testing.assert_array_equal(out, base)
        grid = jnp.array([0.5, 1.0, 2.0])
        by_eps = jax.jit(jax.vmap(lambda e: f(KEY, x, e)))(grid)
        for e, row in zip(grid, by_eps, strict=True):
            np.testing.assert_array_equal(row, f(KEY, x, e))
        keys = jax.random.split(KEY, 3)
        by_key = jax.vmap(lambda k: f(k, x))(keys)
        np.testing.assert_array_equal(by_key[1], f(keys[1], x))
        by_data = jax.vmap(f, in_axes=(None, 0))(KEY, jnp.stack([x, x + 0.5]))
        np.testing.assert_array_equal(by_data[1], f(KEY, x + 0.5))
        grad = jax.jit(jax.grad(lambda x: f(KEY, x).sum()))(x)
        assert grad.shape == x.shape and bool(jnp.all(jnp.isfinite(grad)))
        # each point moves with its interval's edges, by weights that sum to at most 1
        assert 0 < float(jnp.sum(grad)) <= 15 + 1e-6
