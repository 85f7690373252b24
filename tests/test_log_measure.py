"""The exponential mechanism with a base measure (``log_measure``) against its exact
float64 law, on every method and kernel layout; the combined logits against exact
rational arithmetic; arguments, tracing and the stated guarantee.

Every law test can fail: each checks the same draws against the law that ignores
the measure (and against other wrong laws) under ``pytest.raises``, and
``test_wrong_samplers_are_caught`` replaces the implementation with deliberately
wrong ones (measure ignored, measure negated, row shifted by the score maximum
only) and checks that the law tests reject them.
"""

import functools
import inspect
from fractions import Fraction

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from jax.experimental import checkify
from laws import assert_matches_law

import jaxdp
from jaxdp import _measure, _tuning

U = 2.0**-24
METHODS = ["gumbel", "inverse_cdf"]


def measure_law(scores, log_measure, epsilon, sensitivity, monotonic=False):
    """P[r] ∝ mu(r) exp(eps s_r / (2Δ)) (eps s_r / Δ if monotonic) along the last axis, float64."""
    s = np.asarray(scores, np.float64)
    lam = np.broadcast_to(np.asarray(log_measure, np.float64), s.shape)
    factor = epsilon / (sensitivity if monotonic else 2 * sensitivity)
    live = np.isfinite(s) & np.isfinite(lam)
    with np.errstate(invalid="ignore"):
        top = np.max(np.where(live, s, -np.inf), axis=-1, keepdims=True)
        logits = np.where(live, factor * (s - top) + lam, -np.inf)
    return np.exp(logits - scipy.special.logsumexp(logits, axis=-1, keepdims=True))


def assert_groups_match(draws, groups, probs, alpha=1e-3):
    """Chi-square over groups of outcomes (``groups[r]`` the group of outcome r)."""
    draws = np.asarray(draws).ravel()
    assert draws.min() >= 0
    num = int(groups.max()) + 1
    counts = np.bincount(groups[draws], minlength=num)
    p = np.bincount(groups, weights=probs, minlength=num)
    assert counts[p == 0].sum() == 0, "drew a group of probability 0"
    keep = p > 0
    pvalue = scipy.stats.chisquare(counts[keep], p[keep] / p[keep].sum() * counts.sum()).pvalue
    assert pvalue > alpha, (pvalue, counts, p * counts.sum())


# A small row: a -inf score with a finite measure, a finite score with a -inf
# measure, a high score with a small measure, a low score with a large measure.
SCORES = np.array([0.0, 1.0, 2.5, 3.0, 3.0, -2.0, -np.inf, 1.5])
LOG_MU = np.array([0.0, 1.2, -2.0, -0.5, -np.inf, 3.1, 0.0, np.log(0.3)])
EPS, DELTA = 1.3, 0.7


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf", "auto"])
@pytest.mark.parametrize("monotonic", [False, True])
def test_law_small_row(method, monotonic):
    draws = jaxdp.exponential(
        jax.random.key(0),
        SCORES,
        epsilon=EPS,
        sensitivity=DELTA,
        monotonic=monotonic,
        shape=(400_000,),
        method=method,
        log_measure=LOG_MU,
    )
    assert draws.shape == (400_000,) and draws.dtype == jnp.int32
    counts = np.bincount(np.asarray(draws), minlength=8)
    assert counts[4] == 0 and counts[6] == 0  # excluded: -inf measure, -inf score
    law = measure_law(SCORES, LOG_MU, EPS, DELTA, monotonic)
    assert_matches_law(draws, law)
    # The check can fail: the measure ignored, negated, or the other factor.
    finite = np.where(np.isfinite(LOG_MU), 0.0, -np.inf)
    with pytest.raises(AssertionError):
        assert_matches_law(draws, measure_law(SCORES, finite, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, measure_law(SCORES, -LOG_MU, EPS, DELTA, monotonic))
    with pytest.raises(AssertionError):
        assert_matches_law(draws, measure_law(SCORES, LOG_MU, EPS, DELTA, not monotonic))


def _grouped_row(n, num_groups=10, seed=0):
    """Scores constant on 10 groups, a measure that varies inside each group (one
    excluded outcome in each), and the groups' exact probabilities."""
    rng = np.random.default_rng(seed)
    groups = np.arange(n) * num_groups // n
    scores = (-np.arange(num_groups) / 2.0)[groups]
    lam = rng.uniform(-3.0, 3.0, n) + 0.3 * groups
    lam[np.searchsorted(groups, np.arange(num_groups))] = -np.inf
    return groups, scores.astype(np.float32), lam.astype(np.float32)


# (n, rows, draws per row): sizes that pick different layouts. The race: all draws
# in one step (n = 1000, many draws), blocks of rows (10**4 rows of 1000), one long
# row scanned in blocks (n > 2**18); the descent: 3 levels (n = 1000) and 5 (n = 3e5),
# with many draws of one row and one draw of each of many rows.
LAYOUTS = {
    "n1e3_many_draws": (1000, 1, 100_000),
    "n1e3_one_draw_per_row": (1000, 10_000, 1),
    "n3e5_few_draws": (300_000, 1, 1_000),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_law_every_layout(method, layout):
    n, rows, per_row = LAYOUTS[layout]
    if method == "inverse_cdf" and layout == "n3e5_few_draws":
        per_row = 100_000  # cheap for the descent; the race pays n per draw
    groups, scores, lam = _grouped_row(n)
    eps = 2.0
    if rows > 1:
        scores = np.broadcast_to(scores, (rows, n))
        shape = None
    else:
        shape = (per_row,)
    draws = jaxdp.exponential(
        jax.random.key(3),
        scores,
        epsilon=eps,
        sensitivity=1.0,
        shape=shape,
        method=method,
        log_measure=lam,
    )
    assert draws.shape == ((rows,) if rows > 1 else (per_row,))
    law = measure_law(scores.reshape(-1, n)[0], lam, eps, 1.0)
    excluded = ~np.isfinite(lam)
    assert not np.isin(np.asarray(draws), np.nonzero(excluded)[0]).any()
    assert_groups_match(draws, groups, law)
    if n <= 1000 and per_row > 1:
        assert_matches_law(draws, law)  # every outcome, not only the groups
    with pytest.raises(AssertionError):  # the measure ignored
        assert_groups_match(draws, groups, measure_law(scores.reshape(-1, n)[0], 0.0, eps, 1.0))


def _wide_row():
    """Score logits 0 .. -250 offset by a measure over 250 nats: the combined logits
    are all within 5 nats of each other. Weights relative to the score maximum
    (the max-shift without the measure) are all below e**-198: they underflow."""
    scores = np.array([0.0, -100.0, -200.0, -300.0, -400.0, -500.0, -250.0], np.float32)
    lam = np.array([-200.0, -149.0, -102.0, -48.0, -1.0, 47.0, -np.inf], np.float32)
    return scores, lam


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf", "auto"])
def test_measure_over_250_nats_does_not_underflow(method):
    scores, lam = _wide_row()
    eps, delta = 1.0, 1.0
    law = measure_law(scores, lam, eps, delta)
    assert law.min(initial=1, where=law > 0) > 0.004  # every live outcome matters
    # Underflow matters: shifting by the score maximum only, every weight is 0 in float32.
    naive = np.exp(np.float32(0.5) * (scores - scores.max())) * np.exp(lam)
    assert np.all(naive[np.isfinite(lam)][1:] == 0) and naive[0] == 0
    draws = jaxdp.exponential(
        jax.random.key(4),
        scores,
        epsilon=eps,
        sensitivity=delta,
        shape=(200_000,),
        method=method,
        log_measure=lam,
    )
    assert_matches_law(draws, law)
    with pytest.raises(AssertionError):
        assert_matches_law(draws, measure_law(scores, lam, 0.9 * eps, delta))
    lp = np.asarray(
        jaxdp.exponential_log_probs(scores, epsilon=eps, sensitivity=delta, log_measure=lam)
    )
    np.testing.assert_allclose(np.exp(lp), law, rtol=1e-5, atol=0)


def test_log_probs_exact():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(3, 60)) * 40
    lam = rng.uniform(-70, 0, size=(3, 60))
    scores[0, 3] = -np.inf
    lam[1, :5] = -np.inf
    eps = np.array([[0.5], [1.0], [3.0]])
    lp = jaxdp.exponential_log_probs(
        scores, epsilon=eps[:, 0], sensitivity=2.0, log_measure=lam.astype(np.float32)
    )
    assert lp.shape == (3, 60) and lp.dtype == jnp.float32
    with np.errstate(divide="ignore"):  # float64 law of the float32 inputs
        exact = np.log(measure_law(scores.astype(np.float32), lam.astype(np.float32), eps, 2.0))
    lp = np.asarray(lp, np.float64)
    assert np.array_equal(np.isneginf(lp), np.isneginf(exact))
    live = np.isfinite(exact)
    err = np.abs(lp[live] - exact[live])
    assert np.all(err <= 8 * U * (1 + np.abs(exact[live]))), err.max()
    # Under x64 the same law to float64 precision.
    with jax.enable_x64():
        lp64 = np.asarray(
            jaxdp.exponential_log_probs(scores, epsilon=eps[:, 0], sensitivity=2.0, log_measure=lam)
        )
    with np.errstate(divide="ignore"):
        exact64 = np.log(measure_law(scores, lam, eps, 2.0))
    np.testing.assert_allclose(lp64[live], exact64[live], rtol=1e-12, atol=1e-12)


def test_log_probs_axis_and_broadcast():
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(5, 3))  # outcomes along axis 0
    lam = rng.normal(size=(5, 1))  # one measure for every column, in the scores' layout
    lp = jaxdp.exponential_log_probs(scores, epsilon=1.0, sensitivity=1.0, axis=0, log_measure=lam)
    ref = jaxdp.exponential_log_probs(scores.T, epsilon=1.0, sensitivity=1.0, log_measure=lam[:, 0])
    np.testing.assert_allclose(np.asarray(lp), np.asarray(ref).T, rtol=1e-6)
    assert lp.shape == (5, 3)


def test_uniform_measure_is_the_plain_mechanism():
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(4, 30)) * 5
    plain = jaxdp.exponential_log_probs(scores, epsilon=0.7, sensitivity=1.0)
    for c in (0.0, 123.5, -1e4):
        lp = jaxdp.exponential_log_probs(
            scores, epsilon=0.7, sensitivity=1.0, log_measure=np.full(30, c)
        )
        np.testing.assert_allclose(np.asarray(lp), np.asarray(plain), rtol=2e-6, atol=2e-6)


def test_privacy_log_ratio_bounded():
    """For neighbouring scores (each moves by at most Δ) and the same public measure,
    every log-probability ratio is at most ε (Thm 6 of McSherry & Talwar)."""
    rng = np.random.default_rng(8)
    eps, delta = 0.8, 1.0
    for _ in range(20):
        s = rng.normal(size=40) * 10
        s2 = s + rng.uniform(-delta, delta, size=40)
        lam = rng.uniform(-100, 0, size=40)
        with jax.enable_x64():
            a = np.asarray(
                jaxdp.exponential_log_probs(s, epsilon=eps, sensitivity=delta, log_measure=lam)
            )
            b = np.asarray(
                jaxdp.exponential_log_probs(s2, epsilon=eps, sensitivity=delta, log_measure=lam)
            )
        assert np.max(np.abs(a - b)) <= eps * (1 + 1e-12)


# ----------------------------------------------------------------------------- precision


def _exact_logits(s, lam, c):
    """L_r - max L in exact rational arithmetic, as float64."""
    fc, fm = Fraction(float(c)), Fraction(float(s.max()))
    exact = [
        fc * (Fraction(float(a)) - fm) + Fraction(float(b)) for a, b in zip(s, lam, strict=True)
    ]
    top = max(exact)
    return np.array([float(x - top) for x in exact])


def _adversarial_row(rng, n=2000):
    """Scores with large offsets and gaps, and a measure that cancels most of the
    score logits (combined logits in [-90, 0]), spanning up to 1e6 nats."""
    big = rng.choice([1.0, 1e3, 1e6])
    s = (rng.standard_normal(n) * big).astype(np.float32)
    c = np.float32(np.exp(rng.uniform(-15, 8)))
    spread = rng.choice([60.0, 1e3, 1e5, 1e6])
    gap = np.float64(c) * (s.astype(np.float64) - np.float64(s.max()))
    lam = rng.uniform(-90, 0, n) - gap
    lam = np.where(np.abs(lam) < spread, lam, rng.uniform(-spread, 0, n)).astype(np.float32)
    return s, lam, c


def test_combined_logits_are_exact_to_a_few_roundings():
    """hi + lo = L_r - M to within tau (SECURITY.md) against exact rationals; the
    plain float32 sum c (s - m) + lambda fails the same check."""
    rng = np.random.default_rng(9)
    checked = naive_failed = 0
    for _ in range(12):
        s, lam, c = _adversarial_row(rng)
        # Compiled, as the sampler runs it: XLA's simplifier acts only inside jit.
        hi, lo, ok = jax.jit(_measure.combined_logits)(
            jnp.asarray(s)[None], jnp.asarray(lam)[None], jnp.asarray([c])
        )
        assert bool(ok[0])
        got = np.array(
            [
                float(Fraction(float(h)) + Fraction(float(x)))
                for h, x in zip(hi[0], lo[0], strict=True)
            ]
        )
        exact = _exact_logits(s, lam, c)
        normal = exact > -87
        top = np.argmax(exact)
        err = np.abs(got - got[top] - exact)[normal]
        spread = float(lam[np.isfinite(lam)].max() - lam[np.isfinite(lam)].min())
        assert err.max() <= 2 * _measure.tau(spread), (err.max() / U, spread)
        # weights: relative error 2 u_exp + u + tau (u_exp <= 2u on XLA:CPU), up to the
        # common factor exp(got[top])
        w = np.asarray(_measure.weights(hi, lo))[0].astype(np.float64)
        rel = np.abs(w[normal] / (np.exp(exact[normal]) * w[top]) - 1)
        assert rel.max() <= 12 * U + 2 * _measure.tau(spread), rel.max() / U
        naive = (np.float32(c) * (s - s.max()) + lam).astype(np.float64)
        naive_err = np.abs(naive - naive[top] - exact)[normal]
        naive_failed += naive_err.max() > 2 * _measure.tau(spread) + 4 * U
        checked += normal.sum()
    assert checked > 5000 and naive_failed >= 8


def test_scale_is_rounded_down():
    for eps in (0.1, 1 / 3, 1.0, 2.7, 1e-5, 123.4):
        for delta in (1.0, 0.3, 7.0):
            c = float(_measure.round_down_scale(jnp.float32(eps) / (2 * jnp.float32(delta))))
            assert c <= eps / (2 * delta)


def test_stated_guarantee_meets_the_targets():
    for method in ("gumbel", "inverse_cdf"):
        for spread in (0.0, 300.0, 2.0**20):
            for n in (1, 10**3, 10**6):
                eps_p, delta_p = _measure.guarantee(n, 1.0, spread, method)
                assert eps_p - 1.0 <= 1e-5 and delta_p <= 1e-10, (method, spread, n)
            eps_p, delta_p = _measure.guarantee(2**31, 1.0, spread, method)
            assert eps_p - 1.0 <= 1e-5 and delta_p <= 1e-7, (method, spread)


# ----------------------------------------------------------------------------- negative controls


def _ignore_measure(scores, log_measure, scale):
    return _ORIGINAL(scores, jnp.where(log_measure > -jnp.inf, 0.0, -jnp.inf), scale)


def _negate_measure(scores, log_measure, scale):
    return _ORIGINAL(scores, jnp.where(log_measure > -jnp.inf, -log_measure, -jnp.inf), scale)


def _score_max_shift(scores, log_measure, scale):
    """Weights exp(c (s - max s) + lambda) in float32: no common shift of the measure."""
    hi, lo, ok = _ORIGINAL(scores, log_measure, scale)
    live = (scores > -jnp.inf) & (log_measure > -jnp.inf)
    naive = (scores - jnp.max(scores, axis=-1, keepdims=True)) * scale[:, None] + log_measure
    return jnp.where(live, naive, -jnp.inf), jnp.zeros_like(lo), ok


_ORIGINAL = _measure.combined_logits


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("wrong", [_ignore_measure, _negate_measure, _score_max_shift])
def test_wrong_samplers_are_caught(monkeypatch, method, wrong):
    """The law checks above reject samplers that get the measure wrong."""
    monkeypatch.setattr(_measure, "combined_logits", wrong)
    jax.clear_caches()
    try:
        scores, lam = _wide_row()
        draws = np.asarray(
            jaxdp.exponential(
                jax.random.key(4),
                scores,
                epsilon=1.0,
                sensitivity=1.0,
                shape=(20_000,),
                method=method,
                log_measure=lam,
            )
        )
        with pytest.raises(AssertionError):
            assert draws.min() >= 0  # the score-max shift underflows: -1 (invalid row)
            assert_matches_law(draws, measure_law(scores, lam, 1.0, 1.0))
        if wrong is not _score_max_shift:
            small = jaxdp.exponential(
                jax.random.key(0),
                SCORES,
                epsilon=EPS,
                sensitivity=DELTA,
                shape=(50_000,),
                method=method,
                log_measure=LOG_MU,
            )
            with pytest.raises(AssertionError):
                assert_matches_law(small, measure_law(SCORES, LOG_MU, EPS, DELTA))
    finally:
        monkeypatch.undo()
        jax.clear_caches()


# ----------------------------------------------------------------------------- transforms


S8 = jnp.asarray(SCORES, jnp.float32)
L8 = jnp.asarray(LOG_MU, jnp.float32)


@pytest.mark.parametrize("method", ["gumbel", "inverse_cdf", "auto"])
def test_jit_equals_eager_and_vmap(method):
    key = jax.random.key(11)
    kw = dict(epsilon=EPS, sensitivity=DELTA, shape=(64,), method=method)
    eager = jaxdp.exponential(key, S8, log_measure=L8, **kw)
    jitted = jax.jit(lambda k, s, lam: jaxdp.exponential(k, s, log_measure=lam, **kw))(key, S8, L8)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    # vmap over keys, epsilons and measures: each equals its own call.
    keys = jax.random.split(jax.random.key(12), 3)
    eps = jnp.array([0.5, 1.0, 4.0])
    lams = jnp.stack([L8, L8 + jnp.arange(8.0), L8[::-1]])

    def one(k, e, lam):
        return jaxdp.exponential(
            k, S8, epsilon=e, sensitivity=DELTA, shape=(64,), method=method, log_measure=lam
        )

    batched = jax.vmap(one)(keys, eps, lams)
    for i in range(3):
        np.testing.assert_array_equal(
            np.asarray(batched[i]), np.asarray(one(keys[i], eps[i], lams[i]))
        )


def test_vmapped_measures_follow_their_laws():
    lams = jnp.stack([L8, jnp.where(L8 > -jnp.inf, -L8, -jnp.inf)])
    f = jax.vmap(
        lambda lam: jaxdp.exponential(
            jax.random.key(13),
            S8,
            epsilon=EPS,
            sensitivity=DELTA,
            shape=(200_000,),
            log_measure=lam,
        )
    )
    draws = np.asarray(f(lams))
    for i in range(2):
        assert_matches_law(draws[i], measure_law(SCORES, np.asarray(lams[i]), EPS, DELTA))


def test_no_retrace_when_measure_or_epsilon_changes():
    @jax.jit
    @functools.partial(chex.assert_max_traces, n=1)
    def f(key, eps, lam):
        return jaxdp.exponential(key, S8, epsilon=eps, sensitivity=1.0, log_measure=lam, shape=(4,))

    for i, eps in enumerate((0.1, 0.5, 2.0)):
        f(jax.random.key(i), eps, L8 + i)
    chex.clear_trace_counter()


@pytest.mark.parametrize("method", METHODS)
def test_axis_equals_moveaxis(method):
    rng = np.random.default_rng(14)
    scores = jnp.asarray(rng.normal(size=(4, 7, 5)), jnp.float32)
    lam = jnp.asarray(rng.normal(size=(7, 1)), jnp.float32)  # outcomes on axis 1
    key = jax.random.key(15)
    a = jaxdp.exponential(
        key, scores, epsilon=1.0, sensitivity=1.0, axis=1, method=method, log_measure=lam
    )
    b = jaxdp.exponential(
        key,
        jnp.moveaxis(scores, 1, -1),
        epsilon=1.0,
        sensitivity=1.0,
        method=method,
        log_measure=lam[:, 0],
    )
    assert a.shape == (4, 5)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("method", METHODS)
def test_batched_rows_with_a_measure_per_row(method):
    rng = np.random.default_rng(16)
    scores = rng.normal(size=(3, 20)) * 2
    lam = rng.uniform(-4, 4, size=(3, 20))
    lam[1, :10] = -np.inf
    draws = jaxdp.exponential(
        jax.random.key(17),
        scores,
        epsilon=np.array([0.5, 1.0, 4.0]),
        sensitivity=1.0,
        shape=(100_000, 3),
        method=method,
        log_measure=lam,
    )
    for b, eps in enumerate((0.5, 1.0, 4.0)):
        assert_matches_law(draws[:, b], measure_law(scores[b], lam[b], eps, 1.0))
    with pytest.raises(AssertionError):
        assert_matches_law(draws[:, 1], measure_law(scores[1], lam[0], 1.0, 1.0))


# ----------------------------------------------------------------------------- arguments


def _both(**kw):
    """Calls exponential and exponential_log_probs with the same arguments."""
    scores = kw.pop("scores", SCORES)
    yield lambda: jaxdp.exponential(jax.random.key(0), scores, epsilon=1.0, sensitivity=1.0, **kw)
    yield lambda: jaxdp.exponential_log_probs(scores, epsilon=1.0, sensitivity=1.0, **kw)


BAD = {
    "nan": np.where(np.arange(8) == 2, np.nan, 0.0),
    "plus_inf": np.where(np.arange(8) == 5, np.inf, 0.0),
    "wrong_length": np.zeros(3),
    "enlarges_the_scores": np.zeros((2, 8)),
    "all_minus_inf": np.full(8, -np.inf),
    "only_where_scores_are_minus_inf": np.where(np.arange(8) == 6, 0.0, -np.inf),
    "string": "uniform",
}


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_measure_raises_naming_it(bad):
    for call in _both(log_measure=BAD[bad]):
        with pytest.raises(ValueError, match="log_measure"):
            call()


def test_measure_may_be_a_list_int_or_float64():
    for lam in ([0, 1, 2, 3, 4, 5, 6, 7], np.arange(8), np.arange(8.0, dtype=np.float64)):
        lp = jaxdp.exponential_log_probs(SCORES, epsilon=1.0, sensitivity=1.0, log_measure=lam)
        np.testing.assert_allclose(
            np.exp(np.asarray(lp)), measure_law(SCORES, np.arange(8.0), 1.0, 1.0), rtol=1e-5
        )


def test_traced_bad_measure_gives_minus_one_and_checkify_reports():
    scores = jnp.zeros((3, 4))
    good = jnp.zeros(4)
    bad_rows = jnp.array([[0.0, 1.0, 2.0, 3.0], [0.0, jnp.nan, 0.0, 0.0], [-jnp.inf] * 4])

    def f(lam):
        return jaxdp.exponential(
            jax.random.key(0), scores, epsilon=1.0, sensitivity=1.0, shape=(5, 3), log_measure=lam
        )

    out = np.asarray(jax.jit(f)(bad_rows))
    assert np.all(out[:, 0] >= 0) and np.all(out[:, 1:] == -1)
    err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(bad_rows)
    assert "log_measure" in str(err.get())
    err, _ = checkify.checkify(jax.jit(f), errors=checkify.user_checks)(
        jnp.broadcast_to(good, (3, 4))
    )
    assert err.get() is None
    lp = np.asarray(
        jax.jit(
            lambda lam: jaxdp.exponential_log_probs(
                scores, epsilon=1.0, sensitivity=1.0, log_measure=lam
            )
        )(bad_rows)
    )
    assert np.all(np.isfinite(lp[0])) and np.all(np.isnan(lp[1:]))
    # Traced gumbel path: the same sentinel.
    g = jax.jit(
        lambda lam: jaxdp.exponential(
            jax.random.key(0),
            scores,
            epsilon=1.0,
            sensitivity=1.0,
            method="gumbel",
            log_measure=lam,
        )
    )
    out = np.asarray(g(bad_rows))
    assert out[0] >= 0 and np.all(out[1:] == -1)


def test_empty_draws():
    out = jaxdp.exponential(
        jax.random.key(0), SCORES, epsilon=1.0, sensitivity=1.0, shape=(0,), log_measure=LOG_MU
    )
    assert out.shape == (0,)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [3, 8, 40])  # 16-element chunks: all layouts of the race
def test_no_key_reuse(monkeypatch, method, n):
    from jax.experimental.key_reuse._core import check_key_reuse

    monkeypatch.setitem(_tuning.RACE_CHUNK, _tuning.kind(), 16)
    scores = jnp.zeros((3, n))
    exponential = inspect.unwrap(jaxdp.exponential)  # bypass the key-reuse plugin's clone

    def call(k):
        return exponential(
            k,
            scores,
            epsilon=1.0,
            sensitivity=1.0,
            shape=(37, 3),
            method=method,
            log_measure=jnp.zeros(n),
        )

    check_key_reuse(call, jax.random.key(0))
    with jax.debug_key_reuse(True):
        key = jax.random.key(1)
        call(key)
        with pytest.raises(jax.errors.KeyReuseError):
            call(key)


@pytest.mark.parametrize("with_measure", [False, True])
def test_log_probs_with_an_epsilon_batch_keep_outcomes_on_their_axis(with_measure):
    """Scores (n,) with epsilon (3,): rows are the epsilons, outcomes stay last (a
    transposition bug of the plain path, fixed with the measure's)."""
    s = jnp.array([0.0, 1.0, 2.0, 4.0])
    eps = jnp.array([0.1, 1.0, 10.0])
    lam = jnp.log(jnp.array([3.0, 1.0, 0.5, 0.1])) if with_measure else None
    lp = jaxdp.exponential_log_probs(s, epsilon=eps, sensitivity=1.0, log_measure=lam)
    assert lp.shape == (3, 4)
    law = measure_law(s, 0.0 if lam is None else lam, np.asarray(eps)[:, None], 1.0)
    np.testing.assert_allclose(np.exp(np.asarray(lp)), law, rtol=1e-5)
    # outcomes on axis 0 of (n, 2) scores (batch (2,)), epsilon (3, 1): output (3, n, 2)
    s2 = jnp.stack([s, -s], axis=1)
    lam2 = None if lam is None else lam[:, None]
    lp2 = jaxdp.exponential_log_probs(
        s2, epsilon=eps[:, None], sensitivity=1.0, axis=0, log_measure=lam2
    )
    assert lp2.shape == (3, 4, 2)
    np.testing.assert_allclose(np.asarray(lp2[:, :, 0]), np.asarray(lp), rtol=1e-6)


def test_compiled_weights_and_rates_keep_the_pair_exact():
    """``exp(hi) * exp(lo)`` as XLA compiles it inside a jitted kernel: its simplifier
    would merge the two exponentials into ``exp(hi + lo)``, which rounds the sum
    (tens of u at |hi| ~ 80); the weights stay within 2 u_exp + u (5u)."""
    from jaxdp import _measure

    rng = np.random.default_rng(5)
    hi = rng.uniform(-87, 0, 400_000).astype(np.float32)
    lo = (rng.uniform(-1, 1, hi.size) * 1e-5).astype(np.float32)
    exact = hi.astype(np.float64) + lo.astype(np.float64)
    w, r = jax.jit(lambda h, t: (_measure.weights(h, t), _measure.rates(h, t)))(hi, lo)
    w, r = np.asarray(w, np.float64), np.asarray(r, np.float64)
    normal = exact > -86
    assert np.abs(w[normal] / np.exp(exact[normal]) - 1).max() <= 5 * 2.0**-24
    assert np.abs(r[normal] / np.exp(-exact[normal]) - 1).max() <= 5 * 2.0**-24
