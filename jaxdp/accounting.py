"""Privacy accounting: composition theorems, group privacy and a spending ledger.

Everything here is plain Python on concrete numbers (no JAX tracing): these
functions decide *how much* privacy to spend before any mechanism runs.

* :func:`basic_composition`, :func:`advanced_composition` (Dwork, Rothblum &
  Vadhan 2010) and :func:`group_privacy` return a :class:`PrivacyGuarantee`.
* :func:`per_mechanism_epsilon` splits a total (ε, δ) over k adaptively
  composed mechanisms, taking the better of basic and advanced composition.
* :class:`PrivacyBudget` records spends in a ledger and refuses, with
  :class:`BudgetExceededError` and without spending anything, one that would
  exceed the budget.
* :func:`optimal_composition`: the optimal composition of k (ε, δ)-DP
  mechanisms (Kairouz, Oh & Viswanath 2015), exact.
* :func:`dp_event` (optional ``[accounting]`` extra) turns a jaxdp mechanism
  call into a `dp_accounting <https://pypi.org/project/dp-accounting/>`_
  ``DpEvent``: the exponential mechanism as ε-bounded range
  (``BoundedRangeDpEvent``), pure-ε mechanisms by their worst case
  (``PureDpEvent``). ``RdpAccountant`` and ``PLDAccountant`` here are
  dp_accounting's accountants taught those events, bare and under Poisson or
  fixed-size subsampling (imported on first use; they need dp_accounting).

Bad input (negative, NaN or infinite ε, δ outside [0, 1], ...) raises
:class:`ValueError` naming the function, the parameter and the value. Valid
input whose result exceeds the float range (a group of 1000 at ε = 1 with
δ > 0; two spends of 1e308) gives ``inf``, the vacuous guarantee it is, never
``OverflowError``.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BudgetExceededError",
    "LedgerEntry",
    "PerMechanism",
    "PrivacyBudget",
    "PrivacyGuarantee",
    "advanced_composition",
    "basic_composition",
    "dp_event",
    "group_privacy",
    "optimal_composition",
    "per_mechanism_epsilon",
]


class PrivacyGuarantee(NamedTuple):
    """An (ε, δ)-differential-privacy guarantee; unpacks as ``eps, delta = ...``."""

    epsilon: float
    delta: float


class PerMechanism(NamedTuple):
    """The per-mechanism parameters of a k-fold composition (:func:`per_mechanism_epsilon`).

    Attributes:
      epsilon: ε that each of the k mechanisms may use.
      delta: δ of each mechanism (as given).
      delta_prime: the slack δ' of advanced composition (0.0 for basic).
      method: ``"basic"`` or ``"advanced"``, whichever allows the larger ε.
    """

    epsilon: float
    delta: float
    delta_prime: float
    method: str


class LedgerEntry(NamedTuple):
    """One spend recorded by :class:`PrivacyBudget`."""

    label: str | None
    epsilon: float
    delta: float


class BudgetExceededError(Exception):
    """A spend would take a :class:`PrivacyBudget` over its (ε, δ); nothing was spent."""


# ----------------------------------------------------------------------------- checks


def _real(fn: str, name: str, value: Any) -> float:
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise ValueError(f"{fn}: {name} must be a real number, got {value!r}")
    try:
        x = float(operator.index(value)) if isinstance(value, int) else float(value)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{fn}: {name} must be a real number, got {value!r}") from err
    return x


def _epsilon(fn: str, name: str, value: Any) -> float:
    """A finite ε >= 0."""
    x = _real(fn, name, value)
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{fn}: {name} must be finite and >= 0, got {value!r}")
    return x


def _delta(fn: str, name: str, value: Any, *, open_low: bool = False, open_high=False) -> float:
    """δ in [0, 1] (ends excluded on request)."""
    x = _real(fn, name, value)
    ok = math.isfinite(x) and (x > 0 if open_low else x >= 0) and (x < 1 if open_high else x <= 1)
    if not ok:
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{fn}: {name} must be in {interval}, got {value!r}")
    return x


def _count(fn: str, name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{fn}: {name} must be an int >= 1, got {value!r}")
    try:
        k = operator.index(value)
    except TypeError as err:
        raise ValueError(f"{fn}: {name} must be an int >= 1, got {value!r}") from err
    if k < 1:
        raise ValueError(f"{fn}: {name} must be an int >= 1, got {k}")
    return k


def _mul(a: float | int, b: float) -> float:
    """``a * b`` in float64, ``inf`` where the product exceeds the float range.

    ``a`` may be a Python int of any size (a count); ``b`` a finite float >= 0.
    """
    if b == 0 or a == 0:
        return 0.0
    try:
        return float(a) * b
    except OverflowError:  # int too large for a float: the product overflows too
        return math.inf


def _exp(x: float) -> float:
    """``exp(x)``, ``inf`` past the float range (never ``OverflowError``)."""
    return math.inf if x > 709.78 else math.exp(x)


def _fsum(values: Sequence[float]) -> float:
    """:func:`math.fsum` of non-negative floats, ``inf`` when the total overflows."""
    try:
        return math.fsum(values)
    except OverflowError:  # intermediate overflow: the exact sum exceeds the float range
        return math.inf


# ----------------------------------------------------------------------------- composition


def basic_composition(
    epsilons: Sequence[float], deltas: Sequence[float] | None = None
) -> PrivacyGuarantee:
    r"""The basic composition theorem: ε's and δ's add up.

    .. math::

        \varepsilon = \sum_i \varepsilon_i, \qquad \delta = \sum_i \delta_i

    **Privacy.** Running mechanisms :math:`M_i`, each
    :math:`(\varepsilon_i, \delta_i)`-DP, on the same data, even adaptively (each
    chosen after seeing the previous outputs), is
    :math:`(\sum\varepsilon_i, \sum\delta_i)`-DP (Dwork & Roth 2014, Thm 3.16;
    Dwork, Kenthapadi, McSherry, Mironov & Naor 2006). Sums use
    :func:`math.fsum`, so ten spends of 0.1 total exactly 1.0.

    Args:
      epsilons: non-empty sequence of finite ε_i >= 0.
      deltas: sequence of δ_i in [0, 1], as long as ``epsilons``; ``None`` means
        all zero (pure DP).

    Returns:
      :class:`PrivacyGuarantee` ``(epsilon, delta)``; δ is not capped at 1 (a
      total δ >= 1 is a vacuous guarantee). A total ε beyond the float range
      (e.g. two spends of 1e308) is returned as ``inf``, the vacuous guarantee
      it is, rather than raising ``OverflowError``.

    Raises:
      ValueError: empty ``epsilons``; lengths differ; an ε negative, NaN or
        infinite; a δ outside [0, 1].

    Examples:
      >>> from jaxdp.accounting import basic_composition
      >>> basic_composition([0.1] * 10)
      PrivacyGuarantee(epsilon=1.0, delta=0.0)
      >>> basic_composition([0.5, 0.25], [1e-6, 1e-6])
      PrivacyGuarantee(epsilon=0.75, delta=2e-06)

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 3.16.
    """
    fn = "basic_composition"
    try:
        eps = list(epsilons)
    except TypeError as err:
        raise ValueError(f"{fn}: epsilons must be a sequence of numbers, got {epsilons!r}") from err
    if not eps:
        raise ValueError(f"{fn}: epsilons must not be empty")
    eps = [_epsilon(fn, f"epsilons[{i}]", e) for i, e in enumerate(eps)]
    if deltas is None:
        dels = [0.0] * len(eps)
    else:
        try:
            dels = list(deltas)
        except TypeError as err:
            raise ValueError(f"{fn}: deltas must be a sequence of numbers, got {deltas!r}") from err
        if len(dels) != len(eps):
            raise ValueError(
                f"{fn}: deltas must have the length of epsilons ({len(eps)}), got {len(dels)}"
            )
        dels = [_delta(fn, f"deltas[{i}]", d) for i, d in enumerate(dels)]
    return PrivacyGuarantee(_fsum(eps), _fsum(dels))


def _advanced_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """sqrt(2k ln(1/δ')) ε + k ε (e^ε - 1), ``inf`` past the float range."""
    if epsilon == 0:
        return 0.0
    kf = _mul(k, 1.0)
    if math.isinf(kf) or epsilon > 709.0:
        return math.inf
    # float products overflow to inf (only math.exp-like calls raise)
    first = math.sqrt(2.0 * kf * math.log(1.0 / delta_prime)) * epsilon
    return first + kf * epsilon * math.expm1(epsilon)


def advanced_composition(
    epsilon: float, delta: float, k: int, delta_prime: float
) -> PrivacyGuarantee:
    r"""The advanced composition theorem (Dwork, Rothblum & Vadhan 2010).

    .. math::

        \varepsilon' = \sqrt{2k\ln(1/\delta')}\,\varepsilon
                       + k\,\varepsilon\,(e^{\varepsilon} - 1),
        \qquad \delta_{\text{total}} = k\delta + \delta'

    **Privacy.** The k-fold adaptive composition of (ε, δ)-DP mechanisms is
    (ε', kδ + δ')-DP for every δ' > 0 (Dwork, Rothblum & Vadhan 2010, Thm III.3;
    Dwork & Roth 2014, Thm 3.20). It beats basic composition (kε) roughly when
    k > 2 ln(1/δ') and ε is small; for a few mechanisms prefer
    :func:`basic_composition` (:func:`per_mechanism_epsilon` picks the better).
    The optimal bound (Kairouz, Oh & Viswanath 2015) is tighter still; it is
    available through dp_accounting.

    Args:
      epsilon: ε >= 0 of each mechanism, finite.
      delta: δ in [0, 1] of each mechanism.
      k: int >= 1, the number of mechanisms.
      delta_prime: δ' in (0, 1), the slack.

    Returns:
      :class:`PrivacyGuarantee` ``(ε', kδ + δ')`` (δ not capped at 1). Values
      beyond the float range (ε > 709, k > 1e308, ...) are ``inf``: the
      guarantee is vacuous, and no ``OverflowError`` is raised.

    Raises:
      ValueError: an argument outside the ranges above.

    Examples:
      >>> from jaxdp.accounting import advanced_composition
      >>> eps, delta = advanced_composition(0.01, 0.0, 10_000, 1e-5)
      >>> round(eps, 4), delta
      (5.8035, 1e-05)

    References:
      C. Dwork, G. N. Rothblum and S. Vadhan, `Boosting and Differential Privacy
      <https://doi.org/10.1109/FOCS.2010.12>`_, FOCS 2010.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 3.20.
    """
    fn = "advanced_composition"
    epsilon = _epsilon(fn, "epsilon", epsilon)
    delta = _delta(fn, "delta", delta)
    k = _count(fn, "k", k)
    delta_prime = _delta(fn, "delta_prime", delta_prime, open_low=True, open_high=True)
    return PrivacyGuarantee(
        _advanced_epsilon(epsilon, k, delta_prime), _mul(k, delta) + delta_prime
    )


_MAX_OPTIMAL_K = 10**7


def _log_softplus(x: float) -> float:
    """log(1 + e^x), stable for any x."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


class _BinomialLoss:
    """The privacy loss of k-fold ε-randomized response, for δ(ε') (KOV 2015, Thm 3.3).

    Under the first distribution the number l of flipped answers is Bin(k, q),
    q = 1 / (1 + e^ε), and the privacy loss is (k - 2l) ε, so
    δ(ε') = Σ_{l: (k-2l)ε > ε'} P[l] (1 - e^{ε' - (k-2l)ε}), every term >= 0.
    The log-pmf is tabulated once (``math.lgamma``, float64) on the window
    ``l >= kq - 40σ - 50`` (below it P[l] < e^-800) up to the last l with a
    positive loss.
    """

    def __init__(self, epsilon: float, k: int) -> None:
        self.epsilon, self.k = epsilon, k
        q = 1.0 / (1.0 + math.exp(epsilon))
        mean, sd = k * q, math.sqrt(k * q * (1.0 - q))
        first = max(0, math.floor(mean - 40.0 * sd - 50.0))
        last = min(k, math.ceil(k / 2.0) - 1)  # (k - 2l) ε > 0
        log_q, log_p = -_log_softplus(epsilon), -_log_softplus(-epsilon)
        lg_k = math.lgamma(k + 1.0)
        ls = list(range(first, last + 1))
        self.l = np.asarray(ls, np.float64)
        self.log_pmf = np.asarray(
            [lg_k - math.lgamma(v + 1.0) - math.lgamma(k - v + 1.0) for v in ls], np.float64
        ) + (self.l * log_q + (k - self.l) * log_p)

    def delta(self, eps_prime: float) -> float:
        loss = (self.k - 2.0 * self.l) * self.epsilon
        keep = loss > eps_prime
        if not np.any(keep):
            return 0.0
        gain = -np.expm1(eps_prime - loss[keep])
        return min(float(np.sum(np.exp(self.log_pmf[keep]) * gain)), 1.0)


def _optimal_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """The smallest ε' with δ(ε') <= δ' (bisection, rounded up)."""
    hi = _mul(k, epsilon)
    if epsilon == 0 or delta_prime >= 1.0:
        return 0.0
    if delta_prime <= 0.0 or math.isinf(hi) or epsilon > 700.0:
        return hi  # ε > 700: δ(ε') is 1 - e^-700 - ... for every ε' < kε
    loss = _BinomialLoss(epsilon, k)
    if loss.delta(0.0) <= delta_prime:
        return 0.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if loss.delta(mid) <= delta_prime:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 4e-16 * hi:
            break
    return hi


def _combined_delta(deltas: Sequence[float], delta_prime: float) -> float:
    """1 - (1 - δ') Π (1 - δ_i), computed as -expm1(Σ log1p(-δ_i))."""
    logs = [math.log1p(-d) if d < 1 else -math.inf for d in (*deltas, delta_prime)]
    total = math.fsum(logs) if all(math.isfinite(v) for v in logs) else -math.inf
    return -math.expm1(total)


def optimal_composition(
    epsilon: float, delta: float, k: int, delta_prime: float
) -> PrivacyGuarantee:
    r"""The optimal composition theorem of Kairouz, Oh & Viswanath (2015), exact.

    The k-fold adaptive composition of (ε, δ)-DP mechanisms is
    :math:`(\varepsilon', 1 - (1-\delta)^k (1 - \delta'))`-DP for the smallest
    ε' with

    .. math::

        \delta' \ge \sum_{l=0}^{k} \binom{k}{l}
            \frac{\big(e^{(k-l)\varepsilon} - e^{\varepsilon'} e^{l\varepsilon}\big)_+}
                 {(1 + e^{\varepsilon})^k},

    the hockey-stick divergence of k independent ε-randomized responses (KOV
    2015, Thm 3.3), and no smaller ε' is valid for every family of (ε, δ)-DP
    mechanisms: this is the best possible bound, tighter than
    :func:`advanced_composition` always and than :func:`basic_composition`
    whenever δ' > 0. ε' is found by bisection over the continuum (rounded up to
    the next float64, so composing never exceeds it); each sum runs in float64 in
    log space (log-binomial terms, ``expm1`` for the bracket), about 1e-12
    relative for k <= 10**6, and only over the ±40σ window of the binomial
    where terms exceed e^-800.

    **Privacy.** Theorem 3.3 of Kairouz, Oh & Viswanath (2015): valid for
    adaptive composition and tight for homogeneous (ε, δ).

    Args:
      epsilon: ε >= 0 of each mechanism, finite.
      delta: δ in [0, 1] of each mechanism.
      k: int in [1, 10**7], the number of mechanisms (beyond, use an RDP or PLD
        accountant: :func:`dp_event`).
      delta_prime: δ' in [0, 1), the slack; 0 gives ε' = kε (basic composition
        is exact at δ' = 0).

    Returns:
      :class:`PrivacyGuarantee` ``(ε', 1 - (1-δ)^k (1-δ'))``; ``inf`` when kε
      exceeds the float range.

    Raises:
      ValueError: an argument outside the ranges above.

    Examples:
      >>> from jaxdp.accounting import advanced_composition, optimal_composition
      >>> eps, delta = optimal_composition(0.1, 0.0, 100, 1e-5)
      >>> round(eps, 4), delta
      (4.3068, 1e-05)
      >>> round(advanced_composition(0.1, 0.0, 100, 1e-5).epsilon, 4)
      5.8502

    References:
      P. Kairouz, S. Oh and P. Viswanath, `The Composition Theorem for
      Differential Privacy <https://proceedings.mlr.press/v37/kairouz15.html>`_,
      ICML 2015 (IEEE Trans. Inf. Theory 2017), Thm 3.3.
      J. Murtagh and S. Vadhan, `The Complexity of Computing the Optimal
      Composition of Differential Privacy <https://arxiv.org/abs/1507.03113>`_,
      TCC 2016 (heterogeneous ε is #P-hard; homogeneous is this sum).
    """
    fn = "optimal_composition"
    epsilon = _epsilon(fn, "epsilon", epsilon)
    delta = _delta(fn, "delta", delta)
    k = _count(fn, "k", k)
    if k > _MAX_OPTIMAL_K:
        raise ValueError(
            f"{fn}: k must be <= 10**7 for the exact sum, got k={k}; for more mechanisms "
            "use dp_event with an RDP or PLD accountant, or advanced_composition"
        )
    delta_prime = _delta(fn, "delta_prime", delta_prime, open_high=True)
    eps = _optimal_epsilon(epsilon, k, delta_prime)
    return PrivacyGuarantee(eps, _combined_delta([delta] * k, delta_prime))


def group_privacy(epsilon: float, delta: float, group_size: int) -> PrivacyGuarantee:
    r"""The guarantee for groups: datasets that differ in ``group_size`` records.

    .. math::

        \varepsilon_k = k\,\varepsilon, \qquad \delta_k = k\,e^{(k-1)\varepsilon}\,\delta

    **Privacy.** An (ε, δ)-DP mechanism is (kε, k e^{(k-1)ε} δ)-DP for datasets
    at distance k (chain the definition along k neighbouring steps; Dwork & Roth
    2014, Thm 2.2 for δ = 0; Vadhan 2017, Lemma 2.2 with δ).

    Args:
      epsilon: ε >= 0 of the mechanism, finite.
      delta: δ in [0, 1] of the mechanism.
      group_size: int k >= 1.

    Returns:
      :class:`PrivacyGuarantee` ``(kε, k e^{(k-1)ε} δ)``; δ is not capped at 1.
      The δ term is computed in log space; where it (or kε) exceeds the float
      range the value is ``inf`` (a vacuous guarantee, e.g. ``group_size=1000``
      at ε = 1 and δ > 0), never an ``OverflowError``. δ = 0 stays 0.

    Raises:
      ValueError: an argument outside the ranges above.

    Examples:
      >>> from jaxdp.accounting import group_privacy
      >>> group_privacy(0.1, 0.0, 5)
      PrivacyGuarantee(epsilon=0.5, delta=0.0)
      >>> group_privacy(1.0, 1e-6, 1000)
      PrivacyGuarantee(epsilon=1000.0, delta=inf)

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 2.2.
      S. Vadhan, `The Complexity of Differential Privacy
      <https://doi.org/10.1007/978-3-319-57048-8_7>`_, 2017, Lemma 2.2.
    """
    fn = "group_privacy"
    epsilon = _epsilon(fn, "epsilon", epsilon)
    delta = _delta(fn, "delta", delta)
    k = _count(fn, "group_size", group_size)
    if delta == 0:
        d = 0.0
    else:
        x = _mul(k - 1, epsilon)
        if x <= 700.0:
            d = _mul(k, math.exp(x) * delta)
        else:  # in log space: inf only where the true value exceeds the float range
            d = _exp(math.log(k) + x + math.log(delta))
    return PrivacyGuarantee(_mul(k, epsilon), d)


def per_mechanism_epsilon(
    total_epsilon: float, total_delta: float, k: int, *, delta: float = 0.0
) -> PerMechanism:
    r"""The ε each of k adaptively composed mechanisms may use under a total budget.

    Basic composition allows :math:`\varepsilon = \varepsilon_{\text{total}} / k`
    (when :math:`k\delta \le \delta_{\text{total}}`). Advanced composition with
    the slack :math:`\delta' = \delta_{\text{total}} - k\delta` allows the root of

    .. math::

        \sqrt{2k\ln(1/\delta')}\,\varepsilon + k\,\varepsilon\,(e^{\varepsilon}-1)
        = \varepsilon_{\text{total}},

    found by bisection (the left side increases with ε); the answer is rounded
    down, so composing it never exceeds the total. The larger of the two is
    returned.

    **Privacy.** k mechanisms, each (ε, δ)-DP with the returned ε, compose to
    (``total_epsilon``, ``total_delta``)-DP under the theorem named in
    ``method`` (:func:`basic_composition` or :func:`advanced_composition`).

    Args:
      total_epsilon: the total ε > 0, finite.
      total_delta: the total δ in [0, 1).
      k: int >= 1, the number of mechanisms.
      delta: keyword-only, the δ of each mechanism in [0, 1] (0 for pure-DP
        mechanisms such as the exponential mechanism).

    Returns:
      :class:`PerMechanism` ``(epsilon, delta, delta_prime, method)``.

    Raises:
      ValueError: arguments outside the ranges above, or ``k * delta >
        total_delta`` (no split exists).

    Examples:
      >>> from jaxdp.accounting import per_mechanism_epsilon
      >>> per_mechanism_epsilon(1.0, 0.0, 10)
      PerMechanism(epsilon=0.1, delta=0.0, delta_prime=0.0, method='basic')
      >>> p = per_mechanism_epsilon(1.0, 1e-6, 1000)
      >>> p.method, round(p.epsilon, 6)
      ('advanced', 0.005812)

    References:
      C. Dwork, G. N. Rothblum and S. Vadhan, `Boosting and Differential Privacy
      <https://doi.org/10.1109/FOCS.2010.12>`_, FOCS 2010.
    """
    fn = "per_mechanism_epsilon"
    total_epsilon = _epsilon(fn, "total_epsilon", total_epsilon)
    if total_epsilon == 0:
        raise ValueError(f"{fn}: total_epsilon must be > 0, got {total_epsilon!r}")
    total_delta = _delta(fn, "total_delta", total_delta, open_high=True)
    k = _count(fn, "k", k)
    delta = _delta(fn, "delta", delta)
    slack = total_delta - _mul(k, delta)
    if slack < -1e-15 * max(total_delta, 1e-300):
        raise ValueError(
            f"{fn}: k * delta = {_mul(k, delta)!r} exceeds total_delta = {total_delta!r}; "
            "no split of the budget exists"
        )
    kf = _mul(k, 1.0)  # inf for k beyond the float range: each mechanism gets 0
    basic = PerMechanism(total_epsilon / kf, delta, 0.0, "basic")
    if slack <= 0 or math.isinf(kf):
        return basic
    lo, hi = 0.0, total_epsilon / math.sqrt(2.0 * kf * math.log(1.0 / slack))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _advanced_epsilon(mid, k, slack) <= total_epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    if lo > basic.epsilon:
        return PerMechanism(lo, delta, slack, "advanced")
    return basic


# ----------------------------------------------------------------------------- budget


_RULES = ("basic", "advanced", "optimal")


def _composed(entries: Sequence[LedgerEntry], rule: str, slack: float) -> list[PrivacyGuarantee]:
    """Valid guarantees for the ledger under ``rule`` (each one alone is valid)."""
    eps = [e.epsilon for e in entries]
    dels = [e.delta for e in entries]
    out = [PrivacyGuarantee(_fsum(eps), _fsum(dels))]  # basic: always valid
    if rule == "basic" or not entries:
        return out
    # advanced, heterogeneous (Dwork, Rothblum & Vadhan 2010; KOV 2015 Thm 3.5 is tighter)
    sq = _fsum([e * e for e in eps])
    adv = math.sqrt(2.0 * sq * math.log(1.0 / slack)) + _fsum(
        [e * math.expm1(e) if e < 709 else math.inf for e in eps]
    )
    out.append(PrivacyGuarantee(adv, _fsum(dels) + slack))
    positive = [e for e in eps if e > 0]  # ε = 0 spends add only their δ
    if rule == "optimal" and 0 < len(positive) <= _MAX_OPTIMAL_K:
        # KOV Thm 3.3 with every ε raised to the largest (exact when homogeneous)
        top = max(positive)
        out.append(
            PrivacyGuarantee(
                _optimal_epsilon(top, len(positive), slack), _combined_delta(dels, slack)
            )
        )
    return out


class PrivacyBudget:
    r"""A total (ε, δ) budget with a ledger, spent under a chosen composition rule.

    ``composition`` picks how the ledger's spends add up:

    * ``"basic"`` (default): ε's and δ's add (:func:`basic_composition`, summed
      with :func:`math.fsum`).
    * ``"advanced"``: the better of basic composition and the heterogeneous
      advanced composition :math:`\sqrt{2\ln(1/\delta')\sum_i\varepsilon_i^2} +
      \sum_i \varepsilon_i(e^{\varepsilon_i}-1)`, with total δ
      :math:`\sum_i\delta_i + \delta'` (Dwork, Rothblum & Vadhan 2010).
    * ``"optimal"``: the best of the two above and the optimal composition of
      Kairouz, Oh & Viswanath (:func:`optimal_composition`) with every spend's ε
      raised to the largest one, with total δ
      :math:`1 - (1-\delta')\prod_i(1-\delta_i)`. Exact for equal spends (the
      usual case: k releases of one mechanism); for unequal ε the exact optimum
      is #P-hard (Murtagh & Vadhan 2016) and this stays a valid upper bound.

    ``slack`` is δ' (required for ``"advanced"`` and ``"optimal"``); it is part
    of the budget's δ, so ``slack <= delta``. A spend is accepted when some rule's
    guarantee for the whole ledger (spends so far plus this one) fits the budget;
    one that would not fit raises :class:`BudgetExceededError` and records
    nothing. A relative tolerance of 1e-12 absorbs decimal rounding (ten spends of
    0.1 fit a budget of 1.0). Spends are serialised by a lock, so threads may
    share a budget.

    **Privacy.** :attr:`spent` is a valid (ε, δ)-DP guarantee for all recorded
    releases together, under adaptive composition, provided each release
    really is as private as its recorded spend (basic: Dwork & Roth 2014, Thm
    3.16; advanced: Thm 3.20; optimal: Kairouz, Oh & Viswanath 2015, Thm 3.3).

    Args:
      epsilon: the total ε >= 0, finite.
      delta: the total δ in [0, 1]; default 0 (pure DP).
      composition: keyword-only, ``"basic"``, ``"advanced"`` or ``"optimal"``.
      slack: keyword-only δ' in (0, delta] for ``"advanced"`` and ``"optimal"``;
        must be ``None`` for ``"basic"``.

    Raises:
      ValueError: ε negative, NaN or infinite; δ outside [0, 1]; an unknown
        ``composition``; a missing, superfluous or out-of-range ``slack``.

    Examples:
      >>> from jaxdp.accounting import PrivacyBudget, BudgetExceededError
      >>> budget = PrivacyBudget(1.0)
      >>> budget.spend(0.4, label="mode")
      LedgerEntry(label='mode', epsilon=0.4, delta=0.0)
      >>> budget.remaining
      PrivacyGuarantee(epsilon=0.6, delta=0.0)
      >>> try:
      ...     budget.spend(0.7)
      ... except BudgetExceededError:
      ...     print("refused")
      refused
      >>> len(budget.ledger)
      1
      >>> many = PrivacyBudget(2.5, 1e-6, composition="optimal", slack=1e-6)
      >>> for _ in range(100):
      ...     _ = many.spend(0.05)  # 100 x 0.05 = 5 under basic composition
      >>> round(many.spent.epsilon, 4)
      2.2075

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thms
      3.16 and 3.20.
      P. Kairouz, S. Oh and P. Viswanath, `The Composition Theorem for
      Differential Privacy <https://proceedings.mlr.press/v37/kairouz15.html>`_,
      ICML 2015.
      J. Murtagh and S. Vadhan, `The Complexity of Computing the Optimal
      Composition of Differential Privacy <https://arxiv.org/abs/1507.03113>`_, TCC 2016.
    """

    _RTOL = 1e-12

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        composition: str = "basic",
        slack: float | None = None,
    ) -> None:
        fn = "PrivacyBudget"
        self._epsilon = _epsilon(fn, "epsilon", epsilon)
        self._delta = _delta(fn, "delta", delta)
        if composition not in _RULES:
            raise ValueError(
                f"{fn}: composition must be one of {list(_RULES)}, got {composition!r}"
            )
        if composition == "basic":
            if slack is not None:
                raise ValueError(
                    f"{fn}: slack applies to composition='advanced' or 'optimal', got "
                    f"slack={slack!r} with composition='basic'"
                )
            self._slack = 0.0
        else:
            if slack is None:
                raise ValueError(
                    f"{fn}: composition={composition!r} needs slack, the delta' in (0, delta]"
                )
            self._slack = _delta(fn, "slack", slack, open_low=True)
            if self._slack > self._delta:
                raise ValueError(
                    f"{fn}: slack must be <= delta = {self._delta!r} (it is part of the "
                    f"budget's delta), got slack={slack!r}"
                )
        self._rule = composition
        self._ledger: list[LedgerEntry] = []
        self._lock = threading.Lock()

    @property
    def composition(self) -> str:
        """The composition rule: ``"basic"``, ``"advanced"`` or ``"optimal"``."""
        return self._rule

    @property
    def total(self) -> PrivacyGuarantee:
        """The whole budget."""
        return PrivacyGuarantee(self._epsilon, self._delta)

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every recorded spend, oldest first."""
        return tuple(self._ledger)

    def _fits(self, g: PrivacyGuarantee) -> bool:
        return g.epsilon <= self._epsilon * (1 + self._RTOL) and g.delta <= self._delta * (
            1 + self._RTOL
        )

    def _best(self, entries: Sequence[LedgerEntry]) -> PrivacyGuarantee:
        """The guarantee reported for ``entries``: the smallest ε among the rule's
        guarantees whose δ fits the budget (else the basic one)."""
        options = _composed(entries, self._rule, self._slack)
        fitting = [g for g in options if g.delta <= self._delta * (1 + self._RTOL)]
        return min(fitting or options[:1], key=lambda g: (g.epsilon, g.delta))

    @property
    def spent(self) -> PrivacyGuarantee:
        """The guarantee of the ledger so far under the budget's rule."""
        with self._lock:
            return self._best(self._ledger)

    @property
    def remaining(self) -> PrivacyGuarantee:
        """``total - spent``, floored at 0. Under ``"advanced"`` and ``"optimal"``
        composition is not additive: use :meth:`can_spend` to test a spend."""
        s = self.spent
        return PrivacyGuarantee(
            max(self._epsilon - s.epsilon, 0.0), max(self._delta - s.delta, 0.0)
        )

    def can_spend(self, epsilon: float, delta: float = 0.0) -> bool:
        """Whether :meth:`spend` of ``(epsilon, delta)`` would succeed now."""
        entry = LedgerEntry(
            None, _epsilon("can_spend", "epsilon", epsilon), _delta("can_spend", "delta", delta)
        )
        with self._lock:
            return self._fits(self._best([*self._ledger, entry]))

    def spend(self, epsilon: float, delta: float = 0.0, label: str | None = None) -> LedgerEntry:
        """Records a spend of (ε, δ), or refuses it whole.

        Args:
          epsilon: ε >= 0 of the release, finite.
          delta: δ in [0, 1] of the release; default 0.
          label: an optional name for the ledger (e.g. the query).

        Returns:
          The recorded :class:`LedgerEntry`.

        Raises:
          ValueError: ε negative, NaN or infinite; δ outside [0, 1].
          BudgetExceededError: the spend would exceed the budget; nothing is spent.
        """
        fn = "PrivacyBudget.spend"
        entry = LedgerEntry(label, _epsilon(fn, "epsilon", epsilon), _delta(fn, "delta", delta))
        with self._lock:
            after = self._best([*self._ledger, entry])
            if not self._fits(after):
                before = self._best(self._ledger)
                raise BudgetExceededError(
                    f"{fn}: spending (epsilon={entry.epsilon!r}, delta={entry.delta!r})"
                    f"{'' if label is None else f' for {label!r}'} would bring the total to "
                    f"(epsilon={after.epsilon!r}, delta={after.delta!r}) under "
                    f"{self._rule} composition, over the budget (epsilon={self._epsilon!r}, "
                    f"delta={self._delta!r}); already spent (epsilon={before.epsilon!r}, "
                    f"delta={before.delta!r}). Nothing was spent."
                )
            self._ledger.append(entry)
        return entry

    def __repr__(self) -> str:
        s = self.spent
        rule = "" if self._rule == "basic" else f", {self._rule}, slack={self._slack!r}"
        return (
            f"PrivacyBudget(epsilon={self._epsilon!r}, delta={self._delta!r}{rule}; spent "
            f"epsilon={s.epsilon!r}, delta={s.delta!r} in {len(self._ledger)} entries)"
        )


# ----------------------------------------------------------------------------- dp_accounting


_BOUNDED_RANGE = {
    "exponential",
    "exponential_streaming",
    "exponential_piecewise",
    "joint_top_k",
    "private_mode",
    "private_price",
    "private_quantile",
    "private_quantiles",
    "select_hypothesis",
}
_PURE = {"permute_and_flip"}
_LAZY = ("BoundedRangeDpEvent", "PLDAccountant", "PureDpEvent", "RdpAccountant")


def _bridge():
    try:
        from . import _dp_accounting
    except ImportError as err:
        raise ImportError(
            "jaxdp.accounting's dp_accounting bridge needs dp_accounting: "
            "pip install 'jaxdp[accounting]'"
        ) from err
    return _dp_accounting


def __getattr__(name: str) -> Any:
    """``PureDpEvent``, ``BoundedRangeDpEvent``, ``RdpAccountant`` and
    ``PLDAccountant``, imported on first use (they need dp_accounting)."""
    if name in _LAZY:
        return getattr(_bridge(), name)
    raise AttributeError(f"module 'jaxdp.accounting' has no attribute {name!r}")


def dp_event(
    mechanism: Callable[..., Any] | str,
    *,
    epsilon: float,
    count: int = 1,
    delta: float | None = None,
    num_categories: int | None = None,
    k: int | None = None,
    noise: str = "laplace",
) -> Any:
    r"""A dp_accounting ``DpEvent`` for ``count`` calls (or draws) of a jaxdp mechanism.

    ================================  ==============================================
    mechanism                         event
    ================================  ==============================================
    exponential, exponential_stream-  ``BoundedRangeDpEvent(ε)``: the exponential
    ing, exponential_piecewise,       mechanism is ε-bounded-range (Durfee & Rogers
    private_mode, private_price,      2019), accounted by its exact Rényi curve
    private_quantile(s),              (Cesar & Rogers 2021) and its dominating pair
    select_hypothesis, joint_top_k,
    report_noisy_max(noise="gumbel")
    top_k (``k`` picks)               ``SelfComposedDpEvent(BoundedRangeDpEvent(ε/k),
                                      k)``: k peels at ε/k
    permute_and_flip,                 ``PureDpEvent(ε)``: ε-DP, accounted by its
    report_noisy_max (laplace,        worst case, binary randomized response
    exponential noise)                (Kairouz, Oh & Viswanath 2015)
    laplace                           ``LaplaceDpEvent(noise_multiplier=1/ε)``
    gaussian (needs ``delta``)        ``GaussianDpEvent(noise_multiplier=σ/Δ₂)``, σ of
                                      the analytic Gaussian mechanism
    randomized_response               ``RandomizedResponseDpEvent(k/(e^ε+k-1), k)``
    (``num_categories``)
    ================================  ==============================================

    ``count > 1`` wraps the event in ``SelfComposedDpEvent(event, count)``: each
    draw of a batch (``shape``) is a separate release.

    Which accountant. ``PureDpEvent`` and ``BoundedRangeDpEvent`` subclass
    ``dp_accounting.ZCDpEvent`` (ε²/2- and ε²/8-zCDP), so dp_accounting's own
    ``RdpAccountant`` accepts them un-sampled, through that looser zCDP curve.
    ``jaxdp.accounting.RdpAccountant`` and ``jaxdp.accounting.PLDAccountant``
    (subclasses of dp_accounting's that handle every other event as before) use
    the exact curves and pairs, and also accept them inside
    ``PoissonSampledDpEvent`` (``ADD_OR_REMOVE_ONE``) and
    ``SampledWithoutReplacementDpEvent`` (``REPLACE_ONE``, where the event's
    ``replace_one_epsilon`` = 2ε applies) — which dp_accounting 0.6 offers for
    Gaussian and Laplace events only. For a step that subsamples, wrap the
    event: ``PoissonSampledDpEvent(q, dp_event(jaxdp.private_quantile,
    epsilon=...))``. The derivations are in ``jaxdp/_dp_accounting.py``.

    **Privacy.** The events describe the mechanisms exactly (Laplace, Gaussian,
    randomized response) or by their worst case over all mechanisms of the
    class (ε-DP, ε-bounded range), which is a valid and, for the class, tight
    description. Mind the neighbouring relation: jaxdp's mechanisms use
    add/remove-one (``ADD_OR_REMOVE_ONE``), except ``randomized_response`` and
    ``select_hypothesis`` (replace-one, n public: its event carries
    ``replace_one_epsilon=ε``); dp_accounting accepts
    ``RandomizedResponseDpEvent`` only under ``REPLACE_ONE`` or
    ``REPLACE_SPECIAL``, and ``LaplaceDpEvent`` only under ``ADD_OR_REMOVE_ONE``
    or ``REPLACE_SPECIAL``.

    Args:
      mechanism: a jaxdp mechanism (e.g. ``jaxdp.exponential``) or its name.
      epsilon: the ε passed to the mechanism (> 0; for ``top_k``, the total).
      count: int >= 1, the number of calls or draws on the same data.
      delta: δ in (0, 1) for ``gaussian``; must be ``None`` otherwise.
      num_categories: k >= 2 for ``randomized_response``.
      k: the number of picks for ``top_k``.
      noise: for ``report_noisy_max``: ``"laplace"``, ``"gumbel"`` or ``"exponential"``.

    Returns:
      A ``dp_accounting.DpEvent``.

    Raises:
      ImportError: dp_accounting is not installed (``pip install 'jaxdp[accounting]'``).
      ValueError: an unknown mechanism; ε not finite and > 0; a missing or
        superfluous ``delta``, ``num_categories`` or ``k``; a bad ``count``.

    Examples:
      >>> import jaxdp
      >>> from jaxdp.accounting import dp_event
      >>> dp_event(jaxdp.exponential, epsilon=1.0)  # doctest: +SKIP
      BoundedRangeDpEvent(rho=0.125, xi=0.0, epsilon=1.0, replace_one_epsilon=2.0)
      >>> import dp_accounting  # doctest: +SKIP
      >>> from jaxdp.accounting import RdpAccountant  # doctest: +SKIP
      >>> step = dp_accounting.PoissonSampledDpEvent(  # doctest: +SKIP
      ...     0.01, dp_event(jaxdp.private_quantile, epsilon=0.5))
      >>> acc = RdpAccountant()  # doctest: +SKIP
      >>> _ = acc.compose(step, 1000)  # doctest: +SKIP
      >>> round(acc.get_epsilon(1e-6), 3)  # doctest: +SKIP
      0.343

    References:
      D. Durfee and R. Rogers, `Practical Differentially Private Top-k Selection
      with Pay-what-you-get Composition <https://arxiv.org/abs/1905.04273>`_,
      NeurIPS 2019.
      M. Cesar and R. Rogers, `Bounding, Concentrating, and Truncating: Unifying
      Privacy Loss Composition for Data Analytics <https://arxiv.org/abs/2004.07223>`_,
      ALT 2021.
      J. Dong, D. Durfee and R. Rogers, `Optimal Differential Privacy Composition
      for Exponential Mechanisms <https://arxiv.org/abs/1909.13830>`_, ICML 2020.
      P. Kairouz, S. Oh and P. Viswanath, `The Composition Theorem for
      Differential Privacy <https://proceedings.mlr.press/v37/kairouz15.html>`_,
      ICML 2015.
      Y. Zhu, J. Dong and Y.-X. Wang, `Optimal Accounting of Differential Privacy
      via Characteristic Function <https://arxiv.org/abs/2106.08567>`_, AISTATS
      2022 (dominating pairs under subsampling).
      I. Mironov, `Rényi Differential Privacy <https://arxiv.org/abs/1702.07476>`_,
      CSF 2017.
      Google, `dp_accounting <https://pypi.org/project/dp-accounting/>`_.
    """
    fn = "dp_event"
    name = mechanism if isinstance(mechanism, str) else getattr(mechanism, "__name__", None)
    known = sorted(
        _BOUNDED_RANGE
        | _PURE
        | {"report_noisy_max", "top_k", "laplace", "gaussian", "randomized_response"}
    )
    if name not in known:
        raise ValueError(
            f"{fn}: mechanism must be one of {known} (or the function), got {mechanism!r}"
        )
    eps = _epsilon(fn, "epsilon", epsilon)
    if eps == 0:
        raise ValueError(f"{fn}: epsilon must be > 0, got {epsilon!r}")
    count = _count(fn, "count", count)
    if delta is not None and name != "gaussian":
        raise ValueError(f"{fn}: delta applies to gaussian only, got delta={delta!r} for {name}")
    if num_categories is not None and name != "randomized_response":
        raise ValueError(f"{fn}: num_categories applies to randomized_response only, got {name}")
    if k is not None and name != "top_k":
        raise ValueError(f"{fn}: k applies to top_k only, got k={k!r} for {name}")
    if name == "report_noisy_max" and noise not in ("laplace", "gumbel", "exponential"):
        raise ValueError(
            f"{fn}: noise must be one of ['laplace', 'gumbel', 'exponential'], got {noise!r}"
        )
    try:
        import dp_accounting
    except ImportError as err:
        raise ImportError(
            "jaxdp.accounting.dp_event needs dp_accounting: pip install 'jaxdp[accounting]'"
        ) from err
    bridge = _bridge()

    if name == "select_hypothesis":  # replace-one, n public
        event = bridge.BoundedRangeDpEvent(eps, replace_one_epsilon=eps)
    elif name in _BOUNDED_RANGE or (name == "report_noisy_max" and noise == "gumbel"):
        event = bridge.BoundedRangeDpEvent(eps)
    elif name in _PURE or name == "report_noisy_max":
        event = bridge.PureDpEvent(eps)
    elif name == "top_k":
        if k is None:
            raise ValueError(f"{fn}: top_k needs k, the number of picks")
        picks = _count(fn, "k", k)
        event = bridge.BoundedRangeDpEvent(eps / picks)
        event = event if picks == 1 else dp_accounting.SelfComposedDpEvent(event, picks)
    elif name == "laplace":
        event = dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / eps)
    elif name == "gaussian":
        if delta is None:
            raise ValueError(f"{fn}: gaussian needs delta in (0, 1)")
        d = _delta(fn, "delta", delta, open_low=True, open_high=True)
        from ._additive import analytic_gaussian_sigma

        event = dp_accounting.GaussianDpEvent(noise_multiplier=analytic_gaussian_sigma(eps, d, 1.0))
    else:  # randomized_response
        if num_categories is None:
            raise ValueError(f"{fn}: randomized_response needs num_categories")
        cats = _count(fn, "num_categories", num_categories)
        if cats < 2:
            raise ValueError(f"{fn}: num_categories must be >= 2, got {cats}")
        # keep w.p. e^eps/(e^eps+k-1) == (1 - p) + p/k with p = k/(e^eps+k-1)
        m = math.exp(-eps)
        p = cats * m / (1.0 + (cats - 1) * m)
        event = dp_accounting.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=cats)
    return event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count)
