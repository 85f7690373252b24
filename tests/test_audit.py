"""jaxdp audits itself: every mechanism under near-worst-case neighbours, and
negative controls (broken mechanisms) that the auditor must catch."""

import doctest
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from negative_controls import exact_inverse_cdf, rounding_inverse_cdf, rounding_inverse_cdf_law

import jaxdp
from jaxdp import audit

EPS = 1.0
N = 200_000  # draws per side in CI
CONF = 0.99
N_OUT = 10  # outcomes of the worst-case score vectors

# Scores that are a neighbour pair for sensitivity 1: outcome 0 falls by 1, every
# other outcome rises by 1 (non-monotonic): the exponential mechanism's loss on
# outcome 0 is log((1 + (n-1) e^eps) / n) -> eps as n grows (0.934 for n = 10).
X = jnp.zeros(N_OUT)
X_NEIGHBOUR = jnp.ones(N_OUT).at[0].set(-1.0)
# A monotonic pair: every other outcome rises by 1.
X_MONO = jnp.ones(N_OUT).at[0].set(0.0)


def em_loss(n, eps):
    return math.log((1 + (n - 1) * math.exp(eps)) / n)


def run(mech, x, xn, n=N, key=0, **kw):
    return audit.estimate_epsilon(mech, x, xn, n, key=jax.random.key(key), confidence=CONF, **kw)


# ----------------------------------------------------------------------------- Clopper-Pearson


def test_clopper_pearson_matches_scipy():
    k = np.array([0, 1, 7, 500, 99_990, 10**6])
    n = np.array([10, 10, 20, 1000, 100_000, 10**6])
    for alpha in (0.05, 1e-4):
        lo, hi = audit.clopper_pearson(k, n, alpha)
        with np.errstate(invalid="ignore"):
            ref_lo = np.where(k == 0, 0.0, scipy.stats.beta.ppf(alpha, k, n - k + 1))
            ref_hi = np.where(k == n, 1.0, scipy.stats.beta.ppf(1 - alpha, k + 1, n - k))
        np.testing.assert_allclose(lo, ref_lo, rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(hi, ref_hi, rtol=1e-6, atol=1e-12)
        assert np.all(lo <= k / n) and np.all(hi >= k / n)
    with pytest.raises(ValueError, match="alpha"):
        audit.clopper_pearson(1, 10, 1.5)
    with pytest.raises(ValueError, match="successes"):
        audit.clopper_pearson(11, 10, 0.05)


# ----------------------------------------------------------------------------- self-audit

KW = dict(epsilon=EPS, sensitivity=1.0)
SELECTION = {
    "exponential_gumbel": (functools.partial(jaxdp.exponential, method="gumbel", **KW), 0.85),
    "exponential_inverse_cdf": (
        functools.partial(jaxdp.exponential, method="inverse_cdf", **KW),
        0.85,
    ),
    "report_noisy_max_laplace": (functools.partial(jaxdp.report_noisy_max, **KW), 0.85),
    "report_noisy_max_exponential": (
        functools.partial(jaxdp.report_noisy_max, noise="exponential", **KW),
        0.85,
    ),
    "report_noisy_max_gumbel": (
        functools.partial(jaxdp.report_noisy_max, noise="gumbel", **KW),
        0.85,
    ),
    "permute_and_flip": (functools.partial(jaxdp.permute_and_flip, **KW), 0.85),
    "top_k": (functools.partial(jaxdp.top_k, k=2, **KW), 0.0),
}


@pytest.mark.parametrize("name", sorted(SELECTION))
def test_self_audit_selection(name):
    mech, floor = SELECTION[name]
    est = run(mech, X, X_NEIGHBOUR)
    assert est.lower_bound < EPS, est
    assert est.lower_bound >= floor, est  # and the audit is not vacuous
    assert est.confidence == CONF and est.num_samples >= N


def test_self_audit_monotonic():
    mech = functools.partial(jaxdp.exponential, monotonic=True, **KW)
    est = run(mech, X, X_MONO)
    assert 0.85 <= est.lower_bound < EPS, est


def test_self_audit_additive():
    lap = functools.partial(jaxdp.laplace, **KW)
    est = run(lap, jnp.array(0.0), jnp.array(1.0))
    assert 0.9 <= est.lower_bound < EPS, est
    granular = functools.partial(jaxdp.laplace, granularity=0.25, **KW)
    est = run(granular, jnp.array(0.1), jnp.array(1.1), key=1)
    assert 0.85 <= est.lower_bound < EPS, est
    # Gaussian: a lower bound on delta at the claimed epsilon, and on epsilon at delta.
    delta = 1e-2
    gauss = functools.partial(jaxdp.gaussian, epsilon=EPS, delta=delta, sensitivity=1.0)
    x, xn = jnp.array(0.0), jnp.array(1.0)
    est = audit.estimate_delta(gauss, x, xn, N, epsilon=EPS, key=jax.random.key(2), confidence=CONF)
    assert 0.5 * delta <= est.lower_bound <= delta, est
    est = run(gauss, x, xn, key=3, delta=delta)
    assert est.lower_bound < EPS and est.delta == delta


def test_self_audit_categorical_and_learning():
    rr = functools.partial(jaxdp.randomized_response, epsilon=EPS, num_categories=4)
    est = run(rr, jnp.array(0), jnp.array(1))
    assert 0.9 <= est.lower_bound < EPS, est
    # private_mode: ten tied categories, the neighbour adds one vote for category 0.
    votes = jnp.repeat(jnp.arange(10), 5)
    mode = functools.partial(jaxdp.private_mode, epsilon=EPS, num_categories=10)
    est = run(mode, votes, jnp.concatenate([votes, jnp.array([0])]), key=1)
    assert 0.6 <= est.lower_bound < EPS, est
    # select_hypothesis, replace-one neighbours: the replaced example flips which
    # hypotheses are right, moving hypothesis 0's error down and the others' up.
    preds = jnp.zeros((10, 4), jnp.int32).at[0, 0].set(1)
    labels = jnp.zeros(4, jnp.int32)

    def learner(key, labels, shape=None):
        return jaxdp.select_hypothesis(key, preds, labels, epsilon=EPS, shape=shape)

    est = run(learner, labels, labels.at[0].set(1), key=2)
    assert 0.6 <= est.lower_bound < EPS, est


def test_self_audit_streaming_and_continuous():
    def streaming(key, scores, shape=None):
        return jaxdp.exponential_streaming(
            key, lambda i: scores[i], N_OUT, chunk_size=4, shape=shape, **KW
        )

    est = run(streaming, X, X_NEIGHBOUR)
    assert 0.8 <= est.lower_bound < EPS, est

    def piecewise(key, intercepts, shape=None):
        edges, slopes = jnp.array([0.0, 1.0, 2.0]), jnp.array([0.0, 0.0])
        return jaxdp.exponential_piecewise(key, edges, intercepts, slopes, shape=shape, **KW)

    est = run(piecewise, jnp.array([0.0, 0.0]), jnp.array([1.0, -1.0]), key=1)
    assert 0.5 <= est.lower_bound < EPS, est
    quantile = functools.partial(jaxdp.private_quantile, q=0.5, epsilon=EPS, bounds=(0.0, 10.0))
    data = jnp.array([1.0, 2.0, 3.0, 4.0, 6.0])
    est = run(quantile, data, jnp.concatenate([data, jnp.array([9.0])]), key=2)
    assert est.lower_bound < EPS, est
    price = functools.partial(jaxdp.private_price, epsilon=EPS, bounds=(0.0, 4.0))
    bids = jnp.array([1.0, 2.0, 3.0, 4.0])
    est = run(price, bids, jnp.concatenate([bids, jnp.array([4.0])]), key=3)
    assert est.lower_bound < EPS, est


# ----------------------------------------------------------------------------- negative controls


def forgot_factor_two(key, scores, shape=None):
    """A textbook bug: exp(eps * s / sensitivity) on non-monotonic scores."""
    return jax.random.categorical(key, EPS * scores / 1.0, shape=shape)


NEGATIVE = {
    "forgotten_factor_2": (forgot_factor_two, X, X_NEIGHBOUR),
    "sensitivity_understated_2x": (
        functools.partial(jaxdp.exponential, epsilon=EPS, sensitivity=0.5),
        X,
        X_NEIGHBOUR,
    ),
    "monotonic_on_non_monotonic": (
        functools.partial(jaxdp.exponential, monotonic=True, **KW),
        X,
        X_NEIGHBOUR,
    ),
    "laplace_sensitivity_understated_2x": (
        functools.partial(jaxdp.laplace, epsilon=EPS, sensitivity=0.5),
        jnp.array(0.0),
        jnp.array(1.0),
    ),
    "noisy_max_monotonic_on_non_monotonic": (
        functools.partial(jaxdp.report_noisy_max, monotonic=True, **KW),
        X,
        X_NEIGHBOUR,
    ),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_negative_controls_are_caught(name):
    mech, x, xn = NEGATIVE[name]
    est = run(mech, x, xn, key=5)
    assert est.lower_bound > 1.3 * EPS, est  # true loss ~ 2 eps


def test_gaussian_understated_sensitivity_is_caught():
    delta = 1e-2
    bad = functools.partial(jaxdp.gaussian, epsilon=EPS, delta=delta, sensitivity=0.5)
    est = audit.estimate_delta(
        bad, jnp.array(0.0), jnp.array(1.0), N, epsilon=EPS, key=jax.random.key(6),
        confidence=CONF,
    )  # fmt: skip
    assert est.lower_bound > 5 * delta, est


# Finding 1 of issue 10: D = [17, 0, ..., 0] and D' = [17, 1, ..., 1] (one added
# record, counts, monotonic), n = 4096, eps = 1.
ROUNDING_N = 4096
ROUNDING_D = jnp.zeros(ROUNDING_N).at[0].set(17.0)
ROUNDING_D_NEIGHBOUR = jnp.ones(ROUNDING_N).at[0].set(17.0)
ROUNDING_KW = dict(epsilon=EPS, sensitivity=1.0, monotonic=True)


def test_rounding_control_really_leaks():
    # The float32 rounding sampler's own law: thousands of non-leader outcomes have
    # probability exactly 0 on D but not on D' (an event of ratio infinity) ...
    p = rounding_inverse_cdf_law(ROUNDING_D, **ROUNDING_KW)
    p_neighbour = rounding_inverse_cdf_law(ROUNDING_D_NEIGHBOUR, **ROUNDING_KW)
    vanish = (p == 0) & (p_neighbour > 0)
    assert vanish.sum() > 1000 and p_neighbour[vanish].sum() > 2e-4
    # ... and the sampler draws that law: in 10**6 draws per side, none falls in that
    # set on D, hundreds do on D'.
    bad = functools.partial(rounding_inverse_cdf, **ROUNDING_KW)
    on_d = np.asarray(bad(jax.random.key(0), ROUNDING_D, shape=(10**6,)))
    on_neighbour = np.asarray(bad(jax.random.key(1), ROUNDING_D_NEIGHBOUR, shape=(10**6,)))
    assert vanish[on_d].sum() == 0 and vanish[on_neighbour].sum() > 150
    # The float64 reference loses nothing: every outcome has probability > 0 on both sides.
    good = functools.partial(exact_inverse_cdf, **ROUNDING_KW)
    with jax.enable_x64():
        on_d = np.asarray(good(jax.random.key(0), ROUNDING_D, shape=(10**6,)))
    assert vanish[on_d].sum() > 10


def test_auditor_catches_rounding_control_at_default_settings():
    # The leak is a union of ~2400 outcomes of probability ~1e-7 each: only events
    # built from the rare and unseen outcomes of the selection batch can see it.
    # Default confidence, num_select, num_events and num_bins; 10**7 draws per side.
    bad = functools.partial(rounding_inverse_cdf, **ROUNDING_KW)
    est = audit.estimate_epsilon(
        bad, ROUNDING_D, ROUNDING_D_NEIGHBOUR, 10**7, key=jax.random.key(0)
    )
    assert est.lower_bound > 1.4 * EPS, est  # refutes the claim eps = 1
    assert "not seen in the selection batch" in est.event, est
    # The same audit on a sound sampler of the same law stays below eps: the
    # detection above is the leak, not the audit.
    good = functools.partial(exact_inverse_cdf, **ROUNDING_KW)
    with jax.enable_x64():
        est = audit.estimate_epsilon(
            good, ROUNDING_D, ROUNDING_D_NEIGHBOUR, 10**7, key=jax.random.key(0)
        )
    assert 0.7 <= est.lower_bound < EPS, est


def test_union_of_unseen_outcomes_is_an_event():
    # A mechanism that never outputs 1..200 on x but does, rarely, on x': each
    # outcome is too rare to matter alone (~1e-5), their union (2e-3) is a leak.
    def leaky(key, x, shape=None):
        k1, k2 = jax.random.split(key)
        shape = () if shape is None else shape
        rare = jax.random.bernoulli(k1, 2e-3 * x, shape)
        return jnp.where(rare, jax.random.randint(k2, shape, 1, 201), 0)

    est = run(leaky, jnp.array(0.0), jnp.array(1.0), key=8)
    assert est.lower_bound > 2 * EPS and est.point_estimate == math.inf, est
    # With some mass on 1..200 on x too (ratio e^0.5 < e^eps), nothing is found.
    fair = lambda key, x, shape=None: leaky(key, x + math.exp(-0.5) * (1 - x), shape)  # noqa: E731
    est = run(fair, jnp.array(0.0), jnp.array(1.0), key=8)
    assert est.lower_bound < 0.5, est


def test_statistic_binning_matches_labels():
    # Binary randomized response has privacy loss exactly eps. A 0/1 statistic (bool
    # or float) splits the outputs into two bins and the audit finds the loss.
    eps_true = 0.92
    rr = functools.partial(jaxdp.randomized_response, epsilon=eps_true)
    for statistic in (lambda y: y == 0, lambda y: y.astype(jnp.float32)):
        est = run(rr, jnp.array(0), jnp.array(1), statistic=statistic)
        assert 0.85 <= est.lower_bound <= eps_true, est
        assert est.event.startswith("{statistic == "), est
    # Interval bins are (a, b]: a value equal to an edge falls in the bin it closes.
    binning = audit._Binning("intervals", np.array([0.0, 1.0]))
    values = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    ids = binning.ids(values)
    np.testing.assert_array_equal(ids, [0, 0, 1, 1, 2])
    assert [binning.label(i) for i in range(3)] == [
        "output in (-inf, 0]", "output in (0, 1]", "output in (1, inf]"
    ]  # fmt: skip
    # The same assignment on the device (the montecarlo driver).
    est = run(rr, jnp.array(0), jnp.array(1), statistic=lambda y: y == 0, driver="montecarlo")
    assert 0.85 <= est.lower_bound <= eps_true, est
    # Many distinct values: quantile intervals; the audit still finds the loss.
    lap = functools.partial(jaxdp.laplace, **KW)
    est = run(lap, jnp.array(0.0), jnp.array(1.0), statistic=lambda y: y, key=9)
    assert 0.85 <= est.lower_bound < EPS and "in (" in est.event, est


def test_power_at_ci_budget():
    # Binary randomized response at eps_true has loss exactly eps_true. Claim EPS:
    # a 5% violation is detected at the CI budget; the truth is never exceeded.
    for eps_true, detected in ((1.05, True), (1.0, False)):
        rr = functools.partial(jaxdp.randomized_response, epsilon=eps_true)
        est = run(rr, jnp.array(0), jnp.array(1), key=7)
        assert (est.lower_bound > EPS) == detected, (eps_true, est)
        assert est.lower_bound <= eps_true


# ----------------------------------------------------------------------------- API


def test_estimate_epsilon_api_and_validation():
    rr = functools.partial(jaxdp.randomized_response, epsilon=EPS)
    est = audit.estimate_epsilon(
        rr, jnp.array(0), jnp.array(1), 5000, key=jax.random.key(0), batch_size=1024
    )
    assert isinstance(est, audit.EpsilonEstimate) and est.num_samples >= 5000
    assert est.num_events <= 4 and est.confidence == 0.95 and "output" in est.event
    assert est.lower_bound <= est.point_estimate
    bads = (
        dict(num_samples=0), dict(confidence=1.0), dict(confidence=True), dict(delta=-0.1),
        dict(num_bins=1), dict(num_select=0), dict(num_events=0),
    )  # fmt: skip
    for bad in bads:
        args = dict(num_samples=100) | bad
        n = args.pop("num_samples")
        name, value = next(iter(bad.items()))
        with pytest.raises(ValueError, match=f"{name}.*{value!r}"):
            audit.estimate_epsilon(rr, jnp.array(0), jnp.array(1), n, key=jax.random.key(0),
                                   **args)  # fmt: skip
    with pytest.raises(ValueError, match="key"):
        audit.estimate_epsilon(rr, jnp.array(0), jnp.array(1), 100, key=0)
    lap = functools.partial(jaxdp.laplace, epsilon=EPS, sensitivity=1.0)
    with pytest.raises(ValueError, match="statistic"):
        audit.estimate_epsilon(lap, jnp.zeros(2), jnp.ones(2), 100, key=jax.random.key(0))
    # A statistic makes vector releases auditable (here: the first coordinate).
    est = audit.estimate_epsilon(
        lap, jnp.zeros(2), jnp.array([1.0, 0.0]), 20_000, key=jax.random.key(0),
        statistic=lambda y: y[:, 0],
    )  # fmt: skip
    assert est.lower_bound < EPS
    with pytest.raises(ValueError, match="convention"):
        audit.estimate_epsilon(lambda key, x: x, jnp.zeros(()), jnp.ones(()), 100,
                               key=jax.random.key(0))  # fmt: skip


def test_montecarlo_driver():
    # The counting step through jaxdp.montecarlo (sharded over every device).
    rr = functools.partial(jaxdp.randomized_response, epsilon=EPS)
    est = audit.estimate_epsilon(
        rr, jnp.array(0), jnp.array(1), 50_000, key=jax.random.key(0), driver="montecarlo",
        confidence=CONF,
    )  # fmt: skip
    assert 0.85 < est.lower_bound < EPS and est.num_samples == 50_000
    with pytest.raises(ValueError, match="driver"):
        audit.estimate_epsilon(rr, jnp.array(0), jnp.array(1), 100, key=jax.random.key(0),
                               driver="gpu")  # fmt: skip


def test_progress_bar_runs():
    pytest.importorskip("tqdm")
    rr = functools.partial(jaxdp.randomized_response, epsilon=EPS)
    est = audit.estimate_epsilon(
        rr, jnp.array(0), jnp.array(1), 2000, key=jax.random.key(0), batch_size=500,
        progress=True,
    )  # fmt: skip
    assert est.num_samples == 2000


def test_doctests():
    for module in (audit, jaxdp._random):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0


# ----------------------------------------------------------------------------- sensitivity


def histogram(data):
    return jnp.bincount(data, length=4)


def test_check_sensitivity_passes_correct_counts():
    data = jnp.array([0, 1, 1, 3, 2, 2, 2])
    report = audit.check_sensitivity(
        histogram, data, sensitivity=1.0, monotonic=True, key=jax.random.key(0), domain=(0, 3)
    )
    assert report.max_change == 1.0 and not report.exceeded
    assert report.monotonic and not report.monotonic_violated
    assert report.num_neighbours > len(data)


def test_check_sensitivity_warns_on_understated_sensitivity():
    def clipped_sum(data):
        return jnp.stack([jnp.sum(jnp.clip(data, 0.0, 5.0))])

    data = jnp.array([0.5, 1.0, 2.0])
    # Only the domain search can find it: the data never exceed 2.
    with pytest.warns(audit.SensitivityWarning, match="declared sensitivity"):
        report = audit.check_sensitivity(
            clipped_sum, data, sensitivity=2.5, key=jax.random.key(1), domain=(0.0, 100.0)
        )
    assert report.exceeded and report.max_change == pytest.approx(5.0)
    assert report.worst.startswith("add record")
    report = audit.check_sensitivity(
        clipped_sum, data, sensitivity=5.0, key=jax.random.key(1), domain=(0.0, 100.0)
    )
    assert not report.exceeded


def test_check_sensitivity_hill_climbs_to_a_narrow_peak():
    def peaked(data):  # a record near 7.3 moves the score by up to 3
        return jnp.stack([jnp.sum(3.0 * jnp.exp(-((data - 7.3) ** 2) * 4.0))])

    data = jnp.array([0.0, 1.0])
    with pytest.warns(audit.SensitivityWarning):
        report = audit.check_sensitivity(
            peaked, data, sensitivity=2.0, key=jax.random.key(2), domain=(0.0, 10.0),
            num_random=32, num_search_steps=10,
        )  # fmt: skip
    assert report.max_change > 2.9


def test_check_sensitivity_monotonic_and_replace():
    def signed(data):  # a record of 0 raises one score and lowers the other
        zeros = jnp.sum(data == 0)
        return jnp.stack([zeros, -zeros]).astype(jnp.float32)

    data = jnp.array([0, 1, 0])
    with pytest.warns(audit.SensitivityWarning, match="monotonic"):
        report = audit.check_sensitivity(
            signed, data, sensitivity=1.0, monotonic=True, key=jax.random.key(3)
        )
    assert report.monotonic_violated and not report.exceeded

    def mean_error(labels):  # sensitivity 1/n under replacement
        return jnp.stack([jnp.mean(labels), 1 - jnp.mean(labels)])

    labels = jnp.array([0, 1, 1, 0, 1])
    report = audit.check_sensitivity(
        mean_error, labels, sensitivity=0.2, relation="replace", key=jax.random.key(4),
        domain=(0, 1),
    )  # fmt: skip
    assert report.max_change == pytest.approx(0.2) and not report.exceeded
    with pytest.raises(ValueError, match="relation"):
        audit.check_sensitivity(mean_error, labels, sensitivity=0.2, relation="swap",
                                key=jax.random.key(4))  # fmt: skip
    with pytest.raises(ValueError, match="sensitivity"):
        audit.check_sensitivity(mean_error, labels, sensitivity=0.0, key=jax.random.key(4))
    with pytest.raises(ValueError, match="dataset"):
        audit.check_sensitivity(mean_error, jnp.zeros((0,)), sensitivity=1.0,
                                key=jax.random.key(4))  # fmt: skip


# ----------------------------------------------------------------------------- bigger audits


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SELECTION))
def test_self_audit_selection_large(name):
    mech, _ = SELECTION[name]
    est = run(mech, X, X_NEIGHBOUR, n=10**7, key=11)
    assert est.lower_bound < EPS, est


@pytest.mark.slow
def test_power_large_budget():
    for eps_true, detected in ((1.01, True), (1.0, False)):
        rr = functools.partial(jaxdp.randomized_response, epsilon=eps_true)
        est = run(rr, jnp.array(0), jnp.array(1), n=10**7, key=12)
        assert (est.lower_bound > EPS) == detected, (eps_true, est)
