"""joint_top_k against the exact law of the joint exponential mechanism over
ordered k-tuples, enumerated in NumPy float64."""

from __future__ import annotations

import itertools

import chex
import jax
import jax.extend.core as jax_core
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.experimental import checkify
from laws import assert_matches_law, top_k_law
from negative_controls import float32_joint_top_k_logits

import jaxdp
from jaxdp import _descent
from jaxdp import _joint_top_k as jtk

KEY = jax.random.key(0)
DRAWS = 200_000
SCORES = np.array([3.0, 7.0, 5.0, 5.0, -np.inf, 1.0])  # a tie and an excluded outcome


def joint_law(scores, k, epsilon, sensitivity, monotonic=False):
    """(tuples, probs): P(s) ∝ exp(-eps max_i(c_(i) - c_{s_i}) / (2 Δ_u)), by enumeration."""
    c = np.asarray(scores, np.float64)
    top = np.sort(c)[::-1][:k]
    delta_u = sensitivity if monotonic else 2 * sensitivity
    tuples = list(itertools.permutations(range(len(c)), k))
    with np.errstate(invalid="ignore"):
        errs = np.array([np.max(top - c[list(t)]) for t in tuples])
    logw = np.where(np.isfinite(errs), -epsilon * errs / (2 * delta_u), -np.inf)
    return tuples, np.exp(logw - scipy.special.logsumexp(logw))


def tuple_ids(draws, tuples, n):
    d = np.asarray(draws).reshape(-1, np.asarray(draws).shape[-1])
    weights = n ** np.arange(d.shape[-1])
    codes = np.array([np.dot(t, weights) for t in tuples])
    order = np.argsort(codes)
    pos = np.searchsorted(codes[order], d @ weights)
    assert np.all(codes[order][np.clip(pos, 0, len(codes) - 1)] == d @ weights)
    return order[pos]


@pytest.mark.parametrize("k, eps, monotonic", [(3, 2.0, False), (2, 1.0, True), (1, 3.0, False)])
def test_law_of_ordered_tuples(k, eps, monotonic):
    draws = jaxdp.joint_top_k(
        KEY, SCORES, k, epsilon=eps, sensitivity=1.0, monotonic=monotonic, shape=(DRAWS,)
    )
    assert draws.shape == (DRAWS, k) and draws.dtype == jnp.int32
    d = np.asarray(draws)
    assert np.all(d >= 0) and not np.any(d == 4)
    assert all(len(set(row)) == k for row in d[:1000])
    tuples, probs = joint_law(SCORES, k, eps, 1.0, monotonic)
    ids = tuple_ids(d, tuples, len(SCORES))
    assert_matches_law(ids, probs)
    with pytest.raises(AssertionError):  # the other sensitivity convention is caught
        assert_matches_law(ids, joint_law(SCORES, k, eps, 1.0, not monotonic)[1])
    if k > 1:
        with pytest.raises(AssertionError):  # peeling at eps/k is a different law
            assert_matches_law(
                ids, top_k_law(np.where(np.isinf(SCORES), -60, SCORES), k, eps, 1.0)[1]
            )


def test_counts_law_larger_n_and_batch_rows():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 6, size=(2, 7)).astype(np.float32)
    draws = jaxdp.joint_top_k(
        KEY,
        counts,
        2,
        epsilon=jnp.array([1.0, 4.0]),
        sensitivity=1.0,
        monotonic=True,
        shape=(DRAWS // 2, 2),
    )
    assert draws.shape == (DRAWS // 2, 2, 2)
    for r, eps in enumerate([1.0, 4.0]):
        tuples, probs = joint_law(counts[r], 2, eps, 1.0, True)
        assert_matches_law(tuple_ids(draws[:, r], tuples, 7), probs)


def test_equal_scores_give_uniform_tuples():
    draws = jaxdp.joint_top_k(KEY, jnp.zeros(4), 2, epsilon=1.0, sensitivity=1.0, shape=(DRAWS,))
    tuples, probs = joint_law(np.zeros(4), 2, 1.0, 1.0)
    assert np.allclose(probs, 1 / 12)
    assert_matches_law(tuple_ids(draws, tuples, 4), probs)


def test_axis_and_integer_scores():
    s = jnp.array([[1, 9], [5, 2], [8, 3]])  # outcomes along axis 0
    a = jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0, axis=0, shape=(5, 2))
    b = jaxdp.joint_top_k(KEY, s.T, 2, epsilon=1.0, sensitivity=1.0, shape=(5, 2))
    np.testing.assert_array_equal(a, b)
    big = jnp.array([2**24 + 1, 2**24, 0], jnp.int32)  # exact gaps above 2**24
    out = jaxdp.joint_top_k(KEY, big, 1, epsilon=4.0, sensitivity=1.0, shape=(2000,))
    # P[0] = 1 / (1 + e**-1) = 0.731 (the gap of 1 is kept); sd 0.01
    assert 0.69 < np.mean(np.asarray(out) == 0) < 0.77


def test_jit_eager_vmap_over_epsilon_no_retrace():
    s = jnp.asarray(SCORES)
    eager = jaxdp.joint_top_k(KEY, s, 2, epsilon=1.0, sensitivity=1.0, shape=(20,))
    jitted = jax.jit(
        lambda k: jaxdp.joint_top_k(k, s, 2, epsilon=1.0, sensitivity=1.0, shape=(20,))
    )(KEY)
    np.testing.assert_array_equal(eager, jitted)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(eps):
        return jaxdp.joint_top_k(KEY, s, 2, epsilon=eps, sensitivity=1.0)

    grid = jnp.array([0.1, 1.0, 10.0])
    assert jax.vmap(run)(grid).shape == (3, 2)
    assert jax.vmap(run)(2 * grid).shape == (3, 2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=jnp.nan), "epsilon"),
        (dict(sensitivity=-1.0), "sensitivity"),
        (dict(k=0), "k"),
        (dict(k=7), "k"),
        (dict(k=True), "k"),
        (dict(k=6), "finite"),
        (dict(monotonic=1), "monotonic"),
        (dict(axis=2), "axis"),
        (dict(shape=(-1,)), "shape"),
        (dict(scores=np.array([1.0, np.nan, 2.0, 0, 0, 0])), "NaN"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    args = dict(scores=SCORES, k=2, epsilon=1.0, sensitivity=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        jaxdp.joint_top_k(KEY, args.pop("scores"), args.pop("k"), **args)


def test_traced_invalid_gives_minus_one_and_checkify_reports():
    def f(eps):
        return jaxdp.joint_top_k(KEY, jnp.asarray(SCORES), 2, epsilon=eps, sensitivity=1.0)

    assert np.all(np.asarray(jax.jit(f)(-1.0)) == -1)
    err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(-1.0)
    assert "epsilon" in str(err.get())


# ----------------------------------------------------------------------------- finite precision

U = 2.0**-24


def reference_log_weights(c, scale, k):
    """float64 ``ln W_ij = -scale (c_i - c_j) + sum_p ln(count_p)`` for a descending
    float32 row whose differences are exact in float64 (moderate ranges)."""
    c = np.asarray(c, np.float64)
    n = len(c)
    pos = np.arange(k)[:, None]
    e = c[:k, None] - c[None, :]
    logw = -scale * e
    for p in range(k):
        row = c[p] - c
        lt = np.searchsorted(row, e.ravel(), side="left").reshape(k, n)
        le = np.searchsorted(row, e.ravel(), side="right").reshape(k, n)
        count = np.where(p < pos, lt, le) - p
        with np.errstate(divide="ignore"):
            term = np.where(count > 0, np.log(np.maximum(count, 1)), -np.inf)
        logw = logw + np.where(p == pos, 0.0, term)
    logw[:, ~np.isfinite(c)] = -np.inf
    return logw


def _adversarial_rows():
    rng = np.random.default_rng(7)
    n = 30_000
    bulk = rng.integers(0, 21, n - 20)
    return [
        # (name, scores, k, scale): ties; counts ~ n**(k-1) against scale E up to ~355
        ("ints", rng.integers(0, 1000, 2000), 10, 0.5),
        ("ties", np.repeat(np.arange(200.0), 50), 10, 1.0),
        ("normal", rng.normal(0, 100, 10**4), 10, 0.45),
        ("k25", rng.integers(0, 50, 5000), 25, 1.5),
        ("huge-counts", np.concatenate([np.full(20, 360.0), bulk]), 20, 0.5),  # scale E to 180
        ("huge-counts-2", np.concatenate([np.full(20, 390.0), bulk]), 20, 0.5),  # to 195
        (
            "k40",  # scale E to 355
            np.concatenate([700 + 0.25 * np.arange(40), rng.integers(0, 40, 19_960) * 1.0001]),
            40,
            0.5,
        ),
        # float32 differences that round: 2**27 - l for small l all round to 2**27
        (
            "rounding",
            np.concatenate([[2.0**27, 2.0**27, 2.0**27 - 16], rng.integers(0, 9, 3000), [-np.inf]]),
            4,
            2e-7,
        ),
    ]


@pytest.mark.parametrize("name, scores, k, eps", _adversarial_rows(), ids=lambda x: None)
def test_group_weights_relative_error(name, scores, k, eps):
    """Every group of normalised weight >= 2**-124 is computed within the stated
    relative bound of a float64 reference. Negative control: the float32
    log-weights ``joint_top_k`` used before exceed twice the bound on every row
    (twice: they are normalised at one group): 30 to 300 times it where scale E
    is large, by far where float32 errors round and groups merge."""
    c = np.sort(np.asarray(scores, np.float32))[::-1]
    n = len(c)
    scale = _descent.scale_down(jnp.float32(eps))
    # Compiled, as the sampler runs it (XLA's simplifier acts only there).
    w, t = jax.jit(jtk.group_weights, static_argnums=2)(jnp.asarray(c)[None], scale[None], k)
    w, t = np.asarray(w[0], np.float64), float(t[0])
    ref = reference_log_weights(c, float(scale), k) - t * np.log(2)  # normalised
    relevant = ref >= -jtk.UNDERFLOW_LOG2 * np.log(2)
    assert relevant.sum() >= 10 and np.max(ref) < 1.01 * np.log(2)
    assert np.all(w[relevant] > 0) and np.all(w[~np.isfinite(ref)] == 0)
    err = np.abs(np.log(w[relevant]) - ref[relevant])
    bound = jtk.weight_error(n, k)
    assert err.max() <= bound, (name, err.max() / U, bound / U)

    old = np.asarray(float32_joint_top_k_logits(jnp.asarray(c), scale, k), np.float64)
    with np.errstate(invalid="ignore"):
        old_err = np.abs((old - old.max()) - (ref - ref.max()))[relevant]
    old_err = np.where(np.isnan(old_err), np.inf, old_err)
    assert old_err.max() > 2 * bound, (name, old_err.max() / bound)


def test_uniform_below_is_exact_integer_arithmetic():

    key = jax.random.key(5)
    m = jnp.asarray(np.random.default_rng(0).integers(1, 2**31 - 1, 4096), jnp.int32)
    m = m.at[:4].set(jnp.array([1, 2, 3, 2**31 - 1], jnp.int32))
    r = np.asarray(jtk.uniform_below(key, m))
    k1, k2 = jax.random.split(key)
    x1 = np.asarray(jax.random.bits(k1, m.shape, jnp.uint32)).astype(object)
    x0 = np.asarray(jax.random.bits(k2, m.shape, jnp.uint32)).astype(object)
    want = [(int(mi) * ((int(a) << 32) | int(b))) >> 64 for mi, a, b in zip(m, x1, x0, strict=True)]
    assert r.tolist() == want
    assert r[0] == 0 and np.all((r >= 0) & (r < np.asarray(m)))


@pytest.mark.parametrize("n, k", [(10**3, 10), (10**4, 10), (10**6, 10), (10**6, 100)])
def test_guarantee_within_targets(n, k):

    eps, delta = jtk.guarantee(n, k, 1.0)
    assert 1.0 < eps <= 1.0 + 1e-5 and 0 < delta <= 1e-10
    eps64, delta64 = jtk.guarantee(n, k, 1.0, np.float64)
    assert eps64 <= 1.0 + 1e-10 and delta64 <= 1e-20


@pytest.mark.parametrize("rows, draws", [(1, 300_000), (20_000, 15)])
def test_law_larger_n_both_layouts(rows, draws):
    """n = 9, k = 3 with ties and an excluded score: 504 tuples. One row with many
    draws (the alias table) and many rows with few draws each (the descent)."""
    scores = np.array([4.0, 9.0, 4.0, 6.0, 6.0, 6.0, 1.0, -np.inf, 8.0])
    batch = np.broadcast_to(scores, (rows, 9))
    shape = (draws,) if rows == 1 else (draws, rows)
    s = jnp.asarray(scores if rows == 1 else batch)
    d = np.asarray(
        jaxdp.joint_top_k(KEY, s, 3, epsilon=1.5, sensitivity=0.5, monotonic=True, shape=shape)
    )
    tuples, probs = joint_law(scores, 3, 1.5, 0.5, True)
    assert_matches_law(tuple_ids(d.reshape(-1, 3), tuples, 9), probs)


def test_law_under_x64():
    """The float64 path (int64 defaults, float64 exponents and ln 2 split)."""
    with jax.enable_x64():
        draws = jaxdp.joint_top_k(KEY, SCORES, 2, epsilon=2.0, sensitivity=1.0, shape=(DRAWS,))
        c = np.sort(np.asarray(SCORES))[::-1]
        w, _ = jtk.group_weights(jnp.asarray(c)[None], jnp.asarray([0.5]), 2)
        assert w.dtype == jnp.float64
    assert draws.dtype == jnp.int32
    tuples, probs = joint_law(SCORES, 2, 2.0, 1.0)
    assert_matches_law(tuple_ids(draws, tuples, len(SCORES)), probs)
    ref = reference_log_weights(c, 0.5, 2)
    live = np.isfinite(ref)
    w = np.asarray(w[0])
    assert np.all(w[~live] == 0)
    assert np.ptp(np.log(w[live]) - ref[live]) <= 1e-13  # one common factor 2**-T


def _scans_of_length(jaxpr, length):
    """Every scan of ``length`` steps in ``jaxpr`` (and its sub-jaxprs), with its body."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan" and eqn.params["length"] == length:
            found.append(eqn.params["jaxpr"].jaxpr)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            found += _scans_of_length(sub, length)
    return found


def _holds(jaxpr, name):
    return any(
        eqn.primitive.name == name
        or any(_holds(s, name) for s in jax_core.jaxprs_in_params(eqn.params))
        for eqn in jaxpr.eqns
    )


def test_fill_steps_hold_no_loop():
    """The uniform fill's k steps (the scan that draws random bits) hold no loop: the
    sizes |A_p| - p are searched for every position at once before it, so on a GPU
    the fill is k small steps, not k times the search's bit length."""
    k, n = 50, 5000
    jaxpr = jax.make_jaxpr(
        lambda key, x: jaxdp.joint_top_k(key, x, k, epsilon=1.0, sensitivity=1.0, shape=(8,))
    )(jax.random.key(0), jnp.zeros(n)).jaxpr
    fills = [s for s in _scans_of_length(jaxpr, k) if _holds(s, "random_bits")]
    # (the search's fori_loop has a static trip count: it is a scan)
    assert fills and not any(_holds(s, "while") or _holds(s, "scan") for s in fills)


@pytest.mark.parametrize(("rows", "n", "k"), [(1, 50, 5), (3, 200, 10), (2, 64, 64)])
def test_count_products_blocked_equal_one_at_a_time(rows, n, k):
    """The GPU's blocked count products (several positions searched per step, the
    products unrolled in order, padding positions a factor 1) equal the CPU's one
    position a step, bit for bit (the mantissas everywhere, the exponents where the
    group is not empty)."""
    rng = np.random.default_rng(rows * n + k)
    c = -np.sort(-rng.normal(size=(rows, n)).astype(np.float32) * 3, axis=1)
    c[:, -2:] = -np.inf
    c[:, 1] = c[:, 0]  # a tie at the top
    cs = jnp.asarray(c)
    e_hi, e_lo = jtk._errors(cs[:, :k, None], cs[:, None, :])
    one = jtk._count_products(cs, e_hi, e_lo, k=k, per=1)
    live = np.asarray(one[0]) > 0
    for per in (2, 3, k):
        blocked = jtk._count_products(cs, e_hi, e_lo, k=k, per=per)
        np.testing.assert_array_equal(np.asarray(blocked[0]), np.asarray(one[0]))
        np.testing.assert_array_equal(np.asarray(blocked[1]), np.asarray(one[1]))
        np.testing.assert_array_equal(np.asarray(blocked[2])[live], np.asarray(one[2])[live])


def test_count_block_rule():
    """One position a step on CPU; on a GPU as many as RACE_CHUNK allows, at most 64:
    k = 100 over 10**5 candidates takes 8 steps of the search, not 100."""
    assert jtk.count_block(1, 100, 10**5, "cpu") == 1
    per = jtk.count_block(1, 100, 10**5, "cuda")
    assert 8 <= per <= jtk.MAX_COUNT_BLOCK and -(-100 // per) <= 8
    assert jtk.count_block(1, 1000, 10**4, "cuda") >= 8
    assert jtk.count_block(10**4, 100, 10**5, "cuda") == 1  # 1e11 values: one at a time
