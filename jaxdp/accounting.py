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
* :func:`dp_event` (optional ``[accounting]`` extra) turns a jaxdp mechanism
  call into a `dp_accounting <https://pypi.org/project/dp-accounting/>`_
  ``DpEvent``, so releases can be composed with its RDP and PLD accountants.

Bad input (negative, NaN or infinite ε, δ outside [0, 1], ...) raises
:class:`ValueError` naming the function, the parameter and the value.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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
      total δ >= 1 is a vacuous guarantee).

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
    return PrivacyGuarantee(math.fsum(eps), math.fsum(dels))


def _advanced_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    return math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) * epsilon + k * epsilon * math.expm1(
        epsilon
    )


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
      :class:`PrivacyGuarantee` ``(ε', kδ + δ')`` (δ not capped at 1).

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
    return PrivacyGuarantee(_advanced_epsilon(epsilon, k, delta_prime), k * delta + delta_prime)


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

    Raises:
      ValueError: an argument outside the ranges above.

    Examples:
      >>> from jaxdp.accounting import group_privacy
      >>> group_privacy(0.1, 0.0, 5)
      PrivacyGuarantee(epsilon=0.5, delta=0.0)

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
    d = 0.0 if delta == 0 else k * math.exp((k - 1) * epsilon) * delta
    return PrivacyGuarantee(k * epsilon, d)


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
    slack = total_delta - k * delta
    if slack < -1e-15 * max(total_delta, 1e-300):
        raise ValueError(
            f"{fn}: k * delta = {k * delta!r} exceeds total_delta = {total_delta!r}; "
            "no split of the budget exists"
        )
    basic = PerMechanism(total_epsilon / k, delta, 0.0, "basic")
    if slack <= 0:
        return basic
    lo, hi = 0.0, total_epsilon / math.sqrt(2.0 * k * math.log(1.0 / slack))
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


class PrivacyBudget:
    """A total (ε, δ) budget, spent under basic composition, with a ledger.

    Spends add up (:func:`basic_composition`, summed with :func:`math.fsum`).
    A spend that would take the total over the budget raises
    :class:`BudgetExceededError` and records nothing. A relative tolerance of
    1e-12 absorbs decimal rounding (ten spends of 0.1 fit a budget of 1.0).
    Spends are serialised by a lock, so threads may share a budget.

    **Privacy.** The ledger's totals are a valid (ε, δ)-DP guarantee for all the
    recorded releases together (basic composition, Dwork & Roth 2014, Thm 3.16),
    provided each release really is as private as its recorded spend.

    Args:
      epsilon: the total ε >= 0, finite.
      delta: the total δ in [0, 1]; default 0 (pure DP).

    Raises:
      ValueError: ε negative, NaN or infinite; δ outside [0, 1].

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

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 3.16.
    """

    _RTOL = 1e-12

    def __init__(self, epsilon: float, delta: float = 0.0) -> None:
        fn = "PrivacyBudget"
        self._epsilon = _epsilon(fn, "epsilon", epsilon)
        self._delta = _delta(fn, "delta", delta)
        self._ledger: list[LedgerEntry] = []
        self._lock = threading.Lock()

    @property
    def total(self) -> PrivacyGuarantee:
        """The whole budget."""
        return PrivacyGuarantee(self._epsilon, self._delta)

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        """Every recorded spend, oldest first."""
        return tuple(self._ledger)

    def _spent(self, extra: tuple[LedgerEntry, ...] = ()) -> PrivacyGuarantee:
        entries = self._ledger + list(extra)
        return PrivacyGuarantee(
            math.fsum(e.epsilon for e in entries), math.fsum(e.delta for e in entries)
        )

    @property
    def spent(self) -> PrivacyGuarantee:
        """The total spent so far (basic composition of the ledger)."""
        with self._lock:
            return self._spent()

    @property
    def remaining(self) -> PrivacyGuarantee:
        """What is left: ``total - spent``, floored at 0."""
        s = self.spent
        return PrivacyGuarantee(
            max(self._epsilon - s.epsilon, 0.0), max(self._delta - s.delta, 0.0)
        )

    def _fits(self, spent: PrivacyGuarantee) -> bool:
        return spent.epsilon <= self._epsilon * (1 + self._RTOL) and spent.delta <= self._delta * (
            1 + self._RTOL
        )

    def can_spend(self, epsilon: float, delta: float = 0.0) -> bool:
        """Whether :meth:`spend` of ``(epsilon, delta)`` would succeed now."""
        entry = LedgerEntry(
            None, _epsilon("can_spend", "epsilon", epsilon), _delta("can_spend", "delta", delta)
        )
        with self._lock:
            return self._fits(self._spent((entry,)))

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
            after = self._spent((entry,))
            if not self._fits(after):
                before = self._spent()
                raise BudgetExceededError(
                    f"{fn}: spending (epsilon={entry.epsilon!r}, delta={entry.delta!r})"
                    f"{'' if label is None else f' for {label!r}'} would bring the total to "
                    f"(epsilon={after.epsilon!r}, delta={after.delta!r}), over the budget "
                    f"(epsilon={self._epsilon!r}, delta={self._delta!r}); already spent "
                    f"(epsilon={before.epsilon!r}, delta={before.delta!r}). Nothing was spent."
                )
            self._ledger.append(entry)
        return entry

    def __repr__(self) -> str:
        s = self.spent
        return (
            f"PrivacyBudget(epsilon={self._epsilon!r}, delta={self._delta!r}; spent "
            f"epsilon={s.epsilon!r}, delta={s.delta!r} in {len(self._ledger)} entries)"
        )


# ----------------------------------------------------------------------------- dp_accounting


_BOUNDED_RANGE = {
    "exponential",
    "exponential_streaming",
    "exponential_piecewise",
    "private_mode",
    "private_price",
    "private_quantile",
    "select_hypothesis",
}
_PURE = {"permute_and_flip"}


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
    exponential, private_mode,        ``ZCDpEvent(rho=ε²/8)``: ε-bounded range, hence
    select_hypothesis,                ε²/8-zCDP (Durfee & Rogers 2019;
    private_price, private_quantile,  Cesar & Rogers 2021)
    exponential_piecewise,
    exponential_streaming,
    report_noisy_max(noise="gumbel")
    top_k (``k`` picks)               ``ZCDpEvent(rho=ε²/(8k))``: k peels at ε/k
    permute_and_flip,                 ``ZCDpEvent(rho=ε²/2)``: ε-DP implies
    report_noisy_max (laplace,        ε²/2-zCDP (Bun & Steinke 2016, Prop 3.3)
    exponential noise)
    laplace                           ``LaplaceDpEvent(noise_multiplier=1/ε)``
    gaussian (needs ``delta``)        ``GaussianDpEvent(noise_multiplier=σ/Δ₂)``, σ of
                                      the analytic Gaussian mechanism
    randomized_response               ``RandomizedResponseDpEvent(k/(e^ε+k-1), k)``
    (``num_categories``)
    ================================  ==============================================

    ``count > 1`` wraps the event in ``SelfComposedDpEvent(event, count)``: each
    draw of a batch (``shape``) is a separate release.

    **Privacy.** The events describe the mechanisms exactly (Laplace, Gaussian,
    randomized response) or by a valid upper bound on their privacy loss
    (zCDP for the selection mechanisms). In dp_accounting 0.6, ``ZCDpEvent`` is
    composed by ``RdpAccountant`` only; ``PLDAccountant`` supports the Laplace,
    Gaussian and randomized-response events. Mind the neighbouring relation:
    jaxdp's mechanisms use add/remove-one (``ADD_OR_REMOVE_ONE``), except
    ``randomized_response`` and ``select_hypothesis`` (replace-one); dp_accounting
    accepts ``RandomizedResponseDpEvent`` only under ``REPLACE_ONE`` or
    ``REPLACE_SPECIAL``, and ``LaplaceDpEvent`` only under ``ADD_OR_REMOVE_ONE``
    or ``REPLACE_SPECIAL``. For a handful of pure-DP releases, zCDP conversion is
    looser than :func:`basic_composition`; it wins for many compositions.

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
      ZCDpEvent(rho=0.125, xi=0.0)

    References:
      M. Bun and T. Steinke, `Concentrated Differential Privacy: Simplifications,
      Extensions, and Lower Bounds <https://arxiv.org/abs/1605.02065>`_, TCC 2016.
      D. Durfee and R. Rogers, `Practical Differentially Private Top-k Selection
      with Pay-what-you-get Composition <https://arxiv.org/abs/1905.04273>`_,
      NeurIPS 2019.
      M. Cesar and R. Rogers, `Bounding, Concentrating, and Truncating: Unifying
      Privacy Loss Composition for Data Analytics <https://arxiv.org/abs/2004.07223>`_,
      ALT 2021.
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
    try:
        import dp_accounting
    except ImportError as err:
        raise ImportError(
            "jaxdp.accounting.dp_event needs dp_accounting: pip install 'jaxdp[accounting]'"
        ) from err

    if name in _BOUNDED_RANGE or (name == "report_noisy_max" and noise == "gumbel"):
        event = dp_accounting.ZCDpEvent(rho=eps * eps / 8.0)
    elif name in _PURE or name == "report_noisy_max":
        if noise not in ("laplace", "gumbel", "exponential"):
            raise ValueError(
                f"{fn}: noise must be one of ['laplace', 'gumbel', 'exponential'], got {noise!r}"
            )
        event = dp_accounting.ZCDpEvent(rho=eps * eps / 2.0)
    elif name == "top_k":
        if k is None:
            raise ValueError(f"{fn}: top_k needs k, the number of picks")
        picks = _count(fn, "k", k)
        event = dp_accounting.ZCDpEvent(rho=eps * eps / (8.0 * picks))
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
