"""Tests of jaxdp.accounting: composition, group privacy, budgets, dp_accounting bridge."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import jaxdp
from jaxdp import accounting
from jaxdp.accounting import (
    BudgetExceededError,
    PrivacyBudget,
    PrivacyGuarantee,
    advanced_composition,
    basic_composition,
    group_privacy,
    per_mechanism_epsilon,
)

# ----------------------------------------------------------------------------- worked examples


def test_basic_composition_worked_examples():
    assert basic_composition([0.1] * 10) == PrivacyGuarantee(1.0, 0.0)  # fsum: exactly 1
    eps, delta = basic_composition([0.5, 0.25, 1.0], [1e-6, 0.0, 2e-6])
    assert eps == 1.75 and delta == pytest.approx(3e-6, rel=1e-15)
    assert basic_composition([0.0]) == (0.0, 0.0)


def test_advanced_composition_worked_examples():
    # eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1), by hand:
    # k = 10_000, eps = 0.01, delta' = 1e-5:
    #   sqrt(2e4 * 11.512925465) = 479.852...; * 0.01 = 4.79852...
    #   1e4 * 0.01 * (e^0.01 - 1) = 100 * 0.01005017 = 1.005017
    eps, delta = advanced_composition(0.01, 0.0, 10_000, 1e-5)
    assert eps == pytest.approx(4.798525 + 1.005017, abs=1e-5)
    assert delta == 1e-5
    # Dwork & Roth Cor 3.21: eps = eps' / (2 sqrt(2 k ln(1/delta'))) gives at most eps'
    # for eps' < 1 (k = 100, delta' = 1e-6, eps' = 0.9)
    k, dp, target = 100, 1e-6, 0.9
    per = target / (2 * math.sqrt(2 * k * math.log(1 / dp)))
    assert advanced_composition(per, 1e-8, k, dp) == (
        pytest.approx(math.sqrt(2 * k * math.log(1 / dp)) * per + k * per * math.expm1(per)),
        pytest.approx(k * 1e-8 + dp),
    )
    assert advanced_composition(per, 0.0, k, dp).epsilon <= target
    # one mechanism: the bound is worse than the trivial eps
    assert advanced_composition(0.5, 0.0, 1, 1e-6).epsilon > 0.5


def test_advanced_beats_basic_only_for_many_small_mechanisms():
    assert advanced_composition(0.01, 0.0, 10_000, 1e-6).epsilon < 0.01 * 10_000
    assert advanced_composition(1.0, 0.0, 10, 1e-6).epsilon > 1.0 * 10


def test_group_privacy_worked_examples():
    assert group_privacy(0.1, 0.0, 5) == PrivacyGuarantee(0.5, 0.0)
    eps, delta = group_privacy(0.5, 1e-6, 3)
    assert eps == 1.5
    assert delta == pytest.approx(3 * math.e * 1e-6, rel=1e-14)  # 3 e^{2 * 0.5} 1e-6
    assert group_privacy(2.0, 1e-5, 1) == (2.0, 1e-5)


def test_per_mechanism_epsilon_inverts_advanced_composition():
    p = per_mechanism_epsilon(1.0, 1e-6, 1000)
    assert p.method == "advanced" and p.delta_prime == 1e-6
    total = advanced_composition(p.epsilon, 0.0, 1000, 1e-6).epsilon
    assert total <= 1.0 and total == pytest.approx(1.0, rel=1e-12)
    assert p.epsilon > 1.0 / 1000  # better than basic
    # few mechanisms: basic wins
    assert per_mechanism_epsilon(1.0, 1e-6, 3) == (1 / 3, 0.0, 0.0, "basic")
    # pure budget: basic only
    assert per_mechanism_epsilon(2.0, 0.0, 4).method == "basic"
    # approximate-DP mechanisms consume part of the total delta
    q = per_mechanism_epsilon(1.0, 1e-5, 1000, delta=5e-9)
    assert q.delta_prime == pytest.approx(1e-5 - 5e-6)
    total = advanced_composition(q.epsilon, 5e-9, 1000, q.delta_prime)
    assert total.epsilon <= 1.0 and total.delta == pytest.approx(1e-5)


# ----------------------------------------------------------------------------- budget


def test_budget_spends_records_and_refuses_without_partial_spend():
    b = PrivacyBudget(1.0, 1e-5)
    e = b.spend(0.25, label="mode")
    assert e == accounting.LedgerEntry("mode", 0.25, 0.0)
    b.spend(0.25, 5e-6, label="gauss")
    assert b.spent == (0.5, 5e-6)
    assert b.remaining == (0.5, 5e-6)
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        b.spend(0.6)
    with pytest.raises(BudgetExceededError):
        b.spend(0.1, 6e-6)  # delta over, epsilon fine: refused whole
    assert len(b.ledger) == 2 and b.spent == (0.5, 5e-6)
    assert b.can_spend(0.5, 5e-6) and not b.can_spend(0.5000001)
    b.spend(0.5, 5e-6)
    assert b.remaining == (0.0, 0.0)
    assert b.total == (1.0, 1e-5)
    assert "PrivacyBudget(epsilon=1.0" in repr(b)


def test_budget_decimal_spends_fit_exactly():
    b = PrivacyBudget(1.0)
    for _ in range(10):
        b.spend(0.1)
    with pytest.raises(BudgetExceededError):
        b.spend(1e-9)
    assert b.spent.epsilon == 1.0


def test_budget_is_thread_safe():
    b = PrivacyBudget(1.0)
    refused = []

    def worker():
        for _ in range(100):
            try:
                b.spend(0.001)
            except BudgetExceededError:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(b.ledger) == 1000 and len(refused) == 1000


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", None, True])
def test_budget_refuses_nonsense_spends(bad):
    b = PrivacyBudget(1.0, 1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        b.spend(bad)
    if bad is not True and bad != "1":
        with pytest.raises(ValueError, match="delta"):
            b.spend(0.1, bad)
    assert b.ledger == () and b.spent == (0.0, 0.0)


def test_budget_constructor_checks():
    with pytest.raises(ValueError, match="PrivacyBudget: epsilon must be finite and >= 0, got -1"):
        PrivacyBudget(-1)
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\], got 2"):
        PrivacyBudget(1.0, 2)
    with pytest.raises(ValueError, match="delta"):
        PrivacyBudget(1.0, -1e-9)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: basic_composition([]), "must not be empty"),
        (lambda: basic_composition([0.1, -0.1]), r"epsilons\[1\] must be finite and >= 0"),
        (lambda: basic_composition([0.1], [0.1, 0.2]), "length"),
        (lambda: basic_composition([0.1], [1.5]), r"deltas\[0\] must be in \[0, 1\]"),
        (lambda: basic_composition(0.1), "sequence"),
        (lambda: advanced_composition(float("nan"), 0, 10, 1e-6), "epsilon must be finite"),
        (lambda: advanced_composition(0.1, 0, 0, 1e-6), "k must be an int >= 1, got 0"),
        (lambda: advanced_composition(0.1, 0, 2.5, 1e-6), "k must be an int"),
        (lambda: advanced_composition(0.1, 0, 10, 0.0), r"delta_prime must be in \(0, 1\)"),
        (lambda: advanced_composition(0.1, 0, 10, 1.0), "delta_prime"),
        (lambda: group_privacy(0.1, 0.0, 0), "group_size must be an int >= 1"),
        (lambda: group_privacy(float("inf"), 0.0, 2), "epsilon must be finite"),
        (lambda: per_mechanism_epsilon(0.0, 1e-6, 10), "total_epsilon must be > 0"),
        (lambda: per_mechanism_epsilon(1.0, 1.0, 10), r"total_delta must be in \[0, 1\)"),
        (lambda: per_mechanism_epsilon(1.0, 1e-6, 10, delta=1e-6), "exceeds total_delta"),
    ],
)
def test_bad_input_names_parameter_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------- dp_accounting


def test_against_dp_accounting_pld_and_optimal_composition():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import accountant as pld_accountant
    from dp_accounting.pld import common, privacy_loss_distribution

    # basic composition of pure-DP mechanisms is tight at delta = 0: the PLD agrees
    eps = [0.3, 0.5, 0.2]
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(0.3)
    )
    for e in eps[1:]:
        pld = pld.compose(
            privacy_loss_distribution.from_privacy_parameters(
                common.DifferentialPrivacyParameters(e)
            )
        )
    assert pld.get_epsilon_for_delta(0.0) == pytest.approx(basic_composition(eps).epsilon, abs=1e-3)

    # the optimal composition (Kairouz, Oh & Viswanath) never exceeds ours, and is
    # within a modest factor of it for many small mechanisms
    for e, k, dp in [(0.1, 100, 1e-6), (0.05, 200, 1e-5), (0.5, 20, 1e-3)]:
        ours = advanced_composition(e, 0.0, k, dp).epsilon
        kov = pld_accountant.advanced_composition(
            common.DifferentialPrivacyParameters(e, 0.0), k, dp
        )
        assert kov <= ours + 1e-9, (e, k, dp, kov, ours)
        assert ours < 2 * kov
        # and our per-mechanism epsilon is no larger than the optimal one
        mine = per_mechanism_epsilon(ours, dp, k).epsilon
        best = pld_accountant.get_smallest_epsilon_from_advanced_composition(
            common.DifferentialPrivacyParameters(ours, dp), k
        )
        assert e * (1 - 1e-9) <= mine <= best * (1 + 1e-6)
    assert dpa is not None


def test_dp_event_bridge_matches_dp_accounting_accountants():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import pld, rdp

    rel = dpa.NeighboringRelation
    # Laplace: one release costs exactly epsilon (pure DP); count composes
    acc = pld.PLDAccountant(rel.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    acc.compose(accounting.dp_event(jaxdp.laplace, epsilon=0.7, count=3))
    assert acc.get_epsilon(1e-12) == pytest.approx(2.1, abs=1e-3)  # delta 0: truncated tail
    # k-ary randomized response (replace-one) at delta = 0 costs epsilon
    acc = pld.PLDAccountant(rel.REPLACE_ONE, value_discretization_interval=1e-4)
    acc.compose(accounting.dp_event(jaxdp.randomized_response, epsilon=1.2, num_categories=4))
    assert acc.get_epsilon(0.0) == pytest.approx(1.2, abs=1e-2)
    # the analytic Gaussian is tight: the PLD accountant recovers epsilon at delta
    acc = pld.PLDAccountant(rel.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    acc.compose(accounting.dp_event(jaxdp.gaussian, epsilon=1.0, delta=1e-5))
    assert acc.get_epsilon(1e-5) == pytest.approx(1.0, abs=1e-2)
    # exponential mechanism: an eps-bounded-range event, still a zCDP event (rho =
    # eps^2 / 8) for dp_accounting's own RDP accountant; many compositions beat both
    # basic and advanced composition
    ev = accounting.dp_event(jaxdp.exponential, epsilon=0.1, count=1000)
    assert isinstance(ev.event, accounting.BoundedRangeDpEvent) and ev.count == 1000
    assert isinstance(ev.event, dpa.ZCDpEvent) and ev.event.rho == 0.1**2 / 8
    acc = rdp.RdpAccountant()
    acc.compose(ev)
    zcdp = acc.get_epsilon(1e-6)
    rho = 1000 * 0.1**2 / 8
    assert zcdp <= rho + 2 * math.sqrt(rho * math.log(1e6)) + 1e-9  # Bun & Steinke Prop 1.3
    assert zcdp < advanced_composition(0.1, 0.0, 1000, 1e-6).epsilon < 0.1 * 1000
    # jaxdp's accountant uses the exact bounded-range curve: tighter still
    exact = accounting.RdpAccountant()
    exact.compose(ev)
    assert exact.get_epsilon(1e-6) < zcdp
    # pure-DP selection mechanisms: PureDpEvent (rho = eps^2 / 2)
    pf = accounting.dp_event(jaxdp.permute_and_flip, epsilon=1.0)
    assert pf == accounting.PureDpEvent(1.0) and pf.rho == 0.5
    assert accounting.dp_event(
        jaxdp.report_noisy_max, epsilon=1.0, noise="gumbel"
    ) == accounting.BoundedRangeDpEvent(1.0)
    assert accounting.dp_event(jaxdp.report_noisy_max, epsilon=1.0) == accounting.PureDpEvent(1.0)
    top = accounting.dp_event("top_k", epsilon=1.0, k=4)
    assert top == dpa.SelfComposedDpEvent(accounting.BoundedRangeDpEvent(0.25), 4)
    assert accounting.dp_event(jaxdp.private_mode, epsilon=2.0) == accounting.BoundedRangeDpEvent(2)
    hyp = accounting.dp_event(jaxdp.select_hypothesis, epsilon=2.0)
    assert hyp.replace_one_epsilon == 2.0  # its epsilon is for replace-one already


def test_dp_event_bad_input():
    with pytest.raises(ValueError, match="mechanism must be one of"):
        accounting.dp_event(print, epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        accounting.dp_event(jaxdp.exponential, epsilon=0.0)
    with pytest.raises(ValueError, match="delta applies to gaussian only"):
        accounting.dp_event(jaxdp.exponential, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="count must be an int >= 1"):
        accounting.dp_event(jaxdp.exponential, epsilon=1.0, count=0)
    pytest.importorskip("dp_accounting")
    with pytest.raises(ValueError, match="gaussian needs delta"):
        accounting.dp_event(jaxdp.gaussian, epsilon=1.0)
    with pytest.raises(ValueError, match="top_k needs k"):
        accounting.dp_event(jaxdp.top_k, epsilon=1.0)
    with pytest.raises(ValueError, match="num_categories"):
        accounting.dp_event(jaxdp.randomized_response, epsilon=1.0)
    with pytest.raises(ValueError, match="noise must be one of"):
        accounting.dp_event(jaxdp.report_noisy_max, epsilon=1.0, noise="cauchy")


def test_dp_event_without_dp_accounting(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ImportError, match=r"jaxdp\[accounting\]"):
        accounting.dp_event(jaxdp.exponential, epsilon=1.0)


# ----------------------------------------------------------------------------- large inputs


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # the totals exceed the float range: a vacuous guarantee, reported as inf
        (lambda: basic_composition([1e308, 1e308]), (math.inf, 0.0)),
        (lambda: basic_composition([1.0], [1.0]), (1.0, 1.0)),
        (lambda: advanced_composition(1000.0, 0.0, 10, 1e-5), (math.inf, 1e-5)),
        (lambda: advanced_composition(1.0, 1e-5, 10**400, 1e-5), (math.inf, math.inf)),
        (lambda: advanced_composition(0.0, 0.0, 10**400, 1e-5), (0.0, 1e-5)),
        (lambda: group_privacy(1.0, 1e-6, 1000), (1000.0, math.inf)),
        (lambda: group_privacy(1.0, 0.0, 10**400), (math.inf, 0.0)),
        (lambda: group_privacy(0.0, 1e-300, 10**400), (0.0, math.inf)),
    ],
)
def test_large_inputs_give_inf_not_overflow_error(call, expected):
    assert tuple(call()) == expected


def test_large_group_delta_is_exact_in_log_space():
    # k e^{(k-1) eps} delta with e^{(k-1) eps} alone beyond the float range
    eps, delta = group_privacy(1.0, 1e-300, 701)
    assert eps == 701.0
    assert delta == pytest.approx(math.exp(math.log(701) + 700 - 300 * math.log(10)), rel=1e-12)
    assert per_mechanism_epsilon(1.0, 0.5, 10**400).epsilon == 0.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: group_privacy(1e400, 0.0, 2), r"epsilon must be finite and >= 0, got inf"),
        (lambda: group_privacy(1.0, 0.0, 0), r"group_size must be an int >= 1, got 0"),
        (lambda: advanced_composition(10**400, 0.0, 2, 1e-5), r"epsilon must be a real"),
        (lambda: basic_composition([10**400]), r"epsilons\[0\] must be a real number"),
        (lambda: accounting.optimal_composition(0.1, 0.0, 10**8, 1e-6), r"k must be <= 10\*\*7"),
        (lambda: accounting.optimal_composition(0.1, 0.0, 5, 1.0), r"delta_prime must be in"),
        (lambda: accounting.optimal_composition(-0.1, 0.0, 5, 0.1), r"epsilon must be finite"),
        (lambda: accounting.optimal_composition(0.1, 0.0, 1.5, 0.1), r"k must be an int"),
    ],
)
def test_large_or_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------- optimal composition


def test_optimal_composition_matches_randomized_response_pld_and_beats_advanced():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import accountant as pld_accountant
    from dp_accounting.pld import common, privacy_loss_distribution

    for eps, k, dp in [(0.1, 100, 1e-5), (0.5, 20, 1e-3), (1.0, 10, 1e-6), (0.05, 500, 1e-7)]:
        ours = accounting.optimal_composition(eps, 0.0, k, dp)
        assert ours.delta == dp
        # independent reference: the (pessimistic, 1e-5-discretised) PLD of k binary
        # randomized responses at eps, which is the worst case of k eps-DP mechanisms
        rr = privacy_loss_distribution.from_randomized_response(
            2.0 / (1.0 + math.exp(eps)), 2, value_discretization_interval=1e-5
        ).self_compose(k)
        ref = rr.get_epsilon_for_delta(dp)
        tol = k * 1e-5 + 1e-4  # the PLD rounds each composed loss up by < 1e-5
        assert ref - tol <= ours.epsilon <= ref + 1e-9, (eps, k, ours, ref)
        # never worse than dp_accounting's KOV (a discrete grid of eps') or advanced
        kov = pld_accountant.advanced_composition(common.DifferentialPrivacyParameters(eps), k, dp)
        assert ours.epsilon <= kov + 1e-12
        assert ours.epsilon < advanced_composition(eps, 0.0, k, dp).epsilon
        assert ours.epsilon <= k * eps
        # and the check can fail: a 2% smaller epsilon would be below the reference
        with pytest.raises(AssertionError):
            assert ref - tol <= 0.98 * ours.epsilon
    # per-mechanism delta: 1 - (1 - delta)^k (1 - delta')
    g = accounting.optimal_composition(0.1, 1e-7, 100, 1e-5)
    assert g.delta == pytest.approx(1 - (1 - 1e-7) ** 100 * (1 - 1e-5), rel=1e-12)
    # edge cases: no slack is basic composition; eps = 0 composes to 0
    assert accounting.optimal_composition(0.3, 0.0, 7, 0.0).epsilon == pytest.approx(2.1)
    assert accounting.optimal_composition(0.0, 0.0, 7, 1e-3).epsilon == 0.0
    # large k where dp_accounting's own KOV overflows: finite, and below advanced
    big = accounting.optimal_composition(0.01, 0.0, 10_000, 1e-6).epsilon
    assert 0 < big < advanced_composition(0.01, 0.0, 10_000, 1e-6).epsilon < 100


# ----------------------------------------------------------------------------- budget rules


@pytest.mark.parametrize("rule", ["advanced", "optimal"])
def test_budget_rules_allow_more_spends_and_still_refuse_without_spending(rule):
    budget = PrivacyBudget(2.5, 1e-6, composition=rule, slack=1e-6)
    basic = PrivacyBudget(2.5, 1e-6)
    n_basic = n_rule = 0
    while basic.can_spend(0.05):
        basic.spend(0.05)
        n_basic += 1
    while True:
        try:
            budget.spend(0.05, label=f"q{n_rule}")
        except BudgetExceededError as err:
            assert "Nothing was spent" in str(err) and rule in str(err)
            break
        n_rule += 1
    assert n_basic == 50
    assert n_rule > n_basic
    assert len(budget.ledger) == n_rule  # the refused spend left no trace
    spent = budget.spent
    assert spent.epsilon <= 2.5 * (1 + 1e-12) and spent.delta <= 1e-6 * (1 + 1e-12)
    # the reported guarantee is the theorem's own value for the ledger
    if rule == "optimal":
        ref = accounting.optimal_composition(0.05, 0.0, n_rule, 1e-6)
    else:
        ref = advanced_composition(0.05, 0.0, n_rule, 1e-6)
    assert spent.epsilon == pytest.approx(ref.epsilon, rel=1e-12)
    assert not budget.can_spend(0.05) and budget.can_spend(0.0)


def test_budget_rule_arguments():
    with pytest.raises(ValueError, match="composition must be one of"):
        PrivacyBudget(1.0, composition="fancy")
    with pytest.raises(ValueError, match="needs slack"):
        PrivacyBudget(1.0, 1e-6, composition="optimal")
    with pytest.raises(ValueError, match=r"slack must be <= delta"):
        PrivacyBudget(1.0, 1e-6, composition="advanced", slack=1e-5)
    with pytest.raises(ValueError, match="slack applies to"):
        PrivacyBudget(1.0, 1e-6, slack=1e-7)
    with pytest.raises(ValueError, match=r"slack must be in \(0, 1\]"):
        PrivacyBudget(1.0, 1e-6, composition="advanced", slack=0.0)
    b = PrivacyBudget(1.0, 1e-6, composition="optimal", slack=1e-7)
    assert b.composition == "optimal" and "optimal" in repr(b)
    # heterogeneous spends: still valid (eps raised to the largest), never above basic
    for e in (0.3, 0.1, 0.2):
        b.spend(e)
    assert b.spent.epsilon <= 0.6 + 1e-12


# ----------------------------------------------------------------------------- exact Renyi curves

ORDERS = np.array([1.25, 1.5, 2.0, 3.0, 8.0, 32.0, 256.0, 1024.0])


def _renyi(p, q, a):
    return np.log(np.sum(p**a * q ** (1 - a))) / (a - 1)


def _em_pair(eps, m):
    """The exponential mechanism (factor eps/2, Delta = 1) on two groups of outcomes,
    m copies of outcome A and one B, before and after a neighbour moves A up and B down
    by the full sensitivity: a two-outcome eps-bounded-range pair."""
    p = np.array([m, 1.0]) / (m + 1.0)
    w = np.array([m * math.exp(eps / 2), math.exp(-eps / 2)])
    return p, w / w.sum()


def test_bounded_range_curve_is_exact_for_the_exponential_mechanism():
    pytest.importorskip("dp_accounting")  # the bridge subclasses its accountants
    from jaxdp import _dp_accounting as bridge

    for eps in (0.3, 1.0, 4.0):
        curve = bridge.bounded_range_rdp(eps, ORDERS)
        # below the zCDP summary and the pure-DP curve
        assert np.all(curve <= ORDERS * eps**2 / 8 + 1e-12)
        assert np.all(curve <= bridge.pure_rdp(eps, ORDERS) + 1e-12)
        # real exponential-mechanism pairs never exceed it, and some attain it: the
        # supremum over the multiplicity m (which sets t) matches to 1e-6
        ms = np.exp(np.linspace(-12, 12, 4001))
        for j, a in enumerate(ORDERS[:6]):
            em = max(
                max(_renyi(*_em_pair(eps, m), a), _renyi(*_em_pair(eps, m)[::-1], a)) for m in ms
            )
            assert em <= curve[j] * (1 + 1e-12), (eps, a, em, curve[j])
            assert em >= curve[j] * (1 - 1e-5), (eps, a, em, curve[j])
            # the check can fail: the curve of a 10% smaller epsilon is exceeded
            with pytest.raises(AssertionError):
                assert em <= bridge.bounded_range_rdp(0.9 * eps, ORDERS)[j] * (1 + 1e-12)
        # pure eps-DP: binary randomized response, in closed form
        hi = math.exp(eps) / (1 + math.exp(eps))
        rr = [_renyi(np.array([hi, 1 - hi]), np.array([1 - hi, hi]), a) for a in ORDERS[:6]]
        np.testing.assert_allclose(bridge.pure_rdp(eps, ORDERS[:6]), rr, rtol=1e-12)


def test_bounded_range_envelope_dominates_every_bounded_range_pair():
    pytest.importorskip("dp_accounting")  # the bridge subclasses its accountants
    from jaxdp import _dp_accounting as bridge

    def hockey(p, q, x):
        return np.sum(np.maximum(p - math.exp(x) * q, 0.0), axis=-1)

    for eps in (0.5, 2.0):
        pe, qe = bridge.bounded_range_envelope(eps)
        assert pe.sum() == pytest.approx(1.0, abs=1e-12) and qe.sum() == pytest.approx(1, abs=1e-12)
        p, q = bridge._br_pairs(eps, 199)
        for rate in (1.0, 0.05):
            mix, mixe = rate * p + (1 - rate) * q, rate * pe + (1 - rate) * qe
            for x in np.linspace(0.0, eps, 21):
                worst = max(hockey(mix, q, x).max(), hockey(q, mix, x).max())
                env = max(hockey(mixe, qe, x), hockey(qe, mixe, x))
                assert worst <= env + 1e-15
        # and it is not loose: at x = 0 it equals the worst pair's total variation
        assert hockey(pe, qe, 0.0) == pytest.approx(hockey(p, q, 0.0).max(), rel=2e-3)


# ----------------------------------------------------------------------------- subsampled DP-SGD


def test_subsampled_dpsgd_with_private_quantile_against_dp_accounting():
    """DP-SGD with adaptive clipping: each step Poisson-samples a batch for the noisy
    gradient (Gaussian) and, independently, one for a private quantile of the gradient
    norms (Andrew et al. 2021), T steps."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import pld, rdp

    q, sigma, eps_q, steps, delta = 0.01, 1.1, 0.5, 2000, 1e-6
    quantile = accounting.dp_event(jaxdp.private_quantile, epsilon=eps_q)
    gaussian = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma))
    step = dpa.ComposedDpEvent([gaussian, dpa.PoissonSampledDpEvent(q, quantile)])
    run = dpa.SelfComposedDpEvent(step, steps)

    # dp_accounting's own accountants refuse the sampled quantile
    for stock in (rdp.RdpAccountant(), pld.PLDAccountant()):
        assert not stock.supports(run)
    results = {}
    for name, acc in (
        ("rdp", accounting.RdpAccountant()),
        ("pld", accounting.PLDAccountant(value_discretization_interval=1e-4)),
    ):
        assert acc.supports(run)
        acc.compose(run)
        results[name] = acc.get_epsilon(delta)
        # the Gaussian part alone, with dp_accounting's own accountant of the same kind
        alone = (rdp.RdpAccountant() if name == "rdp" else pld.PLDAccountant(
            value_discretization_interval=1e-4))  # fmt: skip
        alone.compose(dpa.SelfComposedDpEvent(gaussian, steps))
        base = alone.get_epsilon(delta)
        # the quantile costs something, far less than its basic composition
        assert base < results[name] < base + steps * eps_q
        # the bounded-range accounting beats calling the quantile merely eps-DP
        pure_acc = type(acc)() if name == "rdp" else accounting.PLDAccountant(
            value_discretization_interval=1e-4)  # fmt: skip
        pure = dpa.PoissonSampledDpEvent(q, accounting.PureDpEvent(eps_q))
        pure_acc.compose(dpa.SelfComposedDpEvent(dpa.ComposedDpEvent([gaussian, pure]), steps))
        assert results[name] < pure_acc.get_epsilon(delta)
    # PLD is the sharper accountant for the Gaussian part; both agree within 25%
    assert results["pld"] == pytest.approx(results["rdp"], rel=0.25)


def test_sampled_events_match_exact_hockey_stick_and_renyi():
    dpa = pytest.importorskip("dp_accounting")
    from jaxdp import _dp_accounting as bridge

    rel = dpa.NeighboringRelation
    eps, rate = 1.0, 0.1
    # one Poisson-sampled pure step: the PLD gives the exact hockey stick of the
    # sampled randomized-response pair (two outcomes), to the discretisation
    hi = math.exp(eps) / (1 + math.exp(eps))
    p, q = np.array([hi, 1 - hi]), np.array([1 - hi, hi])
    mix = rate * p + (1 - rate) * q
    exact_eps = math.log(np.max(mix / q))  # delta = 0 at the largest loss
    acc = accounting.PLDAccountant(value_discretization_interval=1e-5)
    acc.compose(dpa.PoissonSampledDpEvent(rate, accounting.PureDpEvent(eps)))
    assert acc.get_epsilon(0.0) == pytest.approx(exact_eps, abs=2e-5)
    assert exact_eps == pytest.approx(math.log(1 + rate * math.expm1(eps)))  # amplification
    # the sampled bounded-range Renyi curve is the max over t of the sampled pairs
    got = bridge.subsampled_rdp(bridge.BoundedRangeDpEvent, eps, rate, ORDERS[:6])
    pairs = bridge._br_pairs(eps, 20001)
    dense = np.max(bridge._subsampled_rdp(*pairs, rate, ORDERS[:6]), axis=-1)
    np.testing.assert_allclose(got, dense, rtol=1e-7)
    assert np.all(got >= dense * (1 - 1e-12))
    assert np.all(got < bridge.subsampled_rdp(bridge.PureDpEvent, eps, rate, ORDERS[:6]))
    # fixed-size sampling (replace-one): 2 eps applies, rate = sample / dataset
    wor = dpa.SampledWithoutReplacementDpEvent(1000, 100, accounting.BoundedRangeDpEvent(eps))
    racc = accounting.RdpAccountant(neighboring_relation=rel.REPLACE_ONE)
    racc.compose(wor)
    ref = accounting.RdpAccountant()
    ref.compose(dpa.PoissonSampledDpEvent(0.1, accounting.BoundedRangeDpEvent(2 * eps)))
    np.testing.assert_allclose(racc._rdp, ref._rdp, rtol=1e-12)
    pacc = accounting.PLDAccountant(rel.REPLACE_ONE)
    pacc.compose(wor)
    assert 0 < pacc.get_epsilon(1e-6) < 2 * eps
    # wrong relations are refused, not silently accounted
    assert not accounting.RdpAccountant(neighboring_relation=rel.REPLACE_ONE).supports(
        dpa.PoissonSampledDpEvent(0.1, accounting.PureDpEvent(eps))
    )
    assert not accounting.PLDAccountant().supports(wor)
    # anything else still goes to dp_accounting
    g = accounting.PLDAccountant()
    g.compose(dpa.GaussianDpEvent(1.0))
    assert g.get_epsilon(1e-5) > 0
