r"""dp_accounting events and accountants for jaxdp's selection mechanisms.

Imported lazily by :mod:`jaxdp.accounting` (``dp_accounting`` is optional).

dp_accounting 0.6 has no event for "a mechanism with this Rényi curve" or "this
pair of distributions": its :class:`~dp_accounting.rdp.RdpAccountant` accepts
only Gaussian events inside ``PoissonSampledDpEvent`` and
``SampledWithoutReplacementDpEvent``, and its PLD accountant only Gaussian and
Laplace ones inside ``PoissonSampledDpEvent``. So this module adds two events
and the two accountants that understand them:

* :class:`PureDpEvent` (ε): an ε-DP mechanism. Its worst case (a *dominating
  pair*: every ε-DP mechanism is a post-processing of it) is binary randomized
  response with keep probability :math:`e^\varepsilon/(1+e^\varepsilon)`
  (Kairouz, Oh & Viswanath 2015), so its exact Rényi curve is

  .. math::

      D_\alpha = \frac{1}{\alpha-1}\log\big(p^\alpha (1-p)^{1-\alpha}
                 + (1-p)^\alpha p^{1-\alpha}\big), \quad p = \frac{e^\varepsilon}{1+e^\varepsilon}.

* :class:`BoundedRangeDpEvent` (ε): an ε-bounded-range mechanism (Durfee &
  Rogers 2019): on neighbouring datasets the privacy loss of every outcome lies
  in an interval :math:`[t-\varepsilon, t]` with :math:`t \in [0, \varepsilon]`.
  The exponential mechanism at ε (factor ε/(2Δ), or ε/Δ when monotonic) is
  ε-BR. Every such pair is a post-processing of the two-outcome pair whose
  losses are exactly :math:`t` and :math:`t-\varepsilon` (Dong, Durfee & Rogers
  2020), so with :math:`x = e^t` the exact Rényi curve (Cesar & Rogers 2021) is
  the maximum over t, which is attained at
  :math:`x^* = \frac{(\alpha-1)(e^{\alpha\varepsilon}-1)}{\alpha(e^{(\alpha-1)\varepsilon}-1)}`:

  .. math::

      D_\alpha = \frac{1}{\alpha-1}\Big[(\alpha-1)\log x^*
          + \log\frac{1-e^{-\alpha\varepsilon}}{\alpha(1-e^{-\varepsilon})}\Big]
      \;\le\; \frac{\alpha\varepsilon^2}{8} \;\le\; D_\alpha^{\text{pure}}.

  The tightest single pair dominating *all* ε-BR pairs, which the PLD accountant
  needs, has the trade-off curve :math:`\beta(a) = (1-a)/(1+(e^\varepsilon-1)a)`
  (the lower envelope of the two-outcome pairs' trade-off curves, convex, so a
  trade-off function itself); its log-likelihood ratio spans
  :math:`[-\varepsilon, \varepsilon]`. It is discretised pessimistically by
  tangents (the discrete pair's trade-off lies below the curve, so it still
  dominates).

Both events subclass :class:`dp_accounting.ZCDpEvent` (ε²/2 and ε²/8 zCDP
respectively), so dp_accounting's own RDP accountant keeps accepting them
un-subsampled (with the looser zCDP curve). :class:`RdpAccountant` and
:class:`PLDAccountant` (subclasses of dp_accounting's, with every other event
handled as before) use the exact curves and pairs, also inside
``PoissonSampledDpEvent`` (add/remove-one; dominating pair
:math:`(qP + (1-q)Q, Q)` and its reverse, Zhu, Dong & Wang 2022, Thm 11) and
``SampledWithoutReplacementDpEvent`` (replace-one, where the event's
``replace_one_epsilon``, 2ε by default, applies: replacing a record is removing
one and adding one, and two ε-BR steps make a 2ε-BR one). The RDP of a
subsampled mechanism is that of the subsampled dominating pair, computed
exactly; for bounded range it is maximised over t on a fine grid.

Inside a sampled event, several of these events (``SelfComposedDpEvent`` /
``ComposedDpEvent`` of them, e.g. ``top_k``) count as one ε-DP event with the
sum of their ε (basic composition, valid; the joint sample forbids composing
them after subsampling). A jaxdp event composed with a Gaussian inside one
sampled event is not supported: sample them separately, or account the pair
with a bound you trust.
"""

from __future__ import annotations

import math
from typing import Any

import attr
import dp_accounting
import numpy as np
from dp_accounting import privacy_accountant
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant

NeighborRel = privacy_accountant.NeighboringRelation
_Error = privacy_accountant.PrivacyAccountant.CompositionErrorDetails

_ENVELOPE_ATOMS = 2001  # tangents of the bounded-range envelope
_T_GRID = 1025  # grid over t for the subsampled bounded-range Rényi curve


# ----------------------------------------------------------------------------- events


def _check_eps(name: str, value: float) -> float:
    x = float(value)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name}: epsilon must be finite and > 0, got {value!r}")
    return x


@attr.s(frozen=True, slots=True, init=False)
class PureDpEvent(dp_accounting.ZCDpEvent):
    """An ε-DP mechanism (add/remove-one), accounted by its worst case.

    Attributes:
      epsilon: ε > 0 under add/remove-one.
      replace_one_epsilon: ε under replace-one (default 2ε).
      rho: ε²/2, the zCDP summary that dp_accounting's own RDP accountant uses.
    """

    epsilon: float = attr.ib(default=1.0)
    replace_one_epsilon: float = attr.ib(default=2.0)

    def __init__(self, epsilon: float, replace_one_epsilon: float | None = None) -> None:
        eps = _check_eps("PureDpEvent", epsilon)
        r1 = (
            2 * eps
            if replace_one_epsilon is None
            else _check_eps("PureDpEvent", replace_one_epsilon)
        )
        self.__attrs_init__(rho=eps * eps / 2.0, xi=0.0, epsilon=eps, replace_one_epsilon=r1)


@attr.s(frozen=True, slots=True, init=False)
class BoundedRangeDpEvent(dp_accounting.ZCDpEvent):
    """An ε-bounded-range mechanism (the exponential mechanism at ε).

    Attributes:
      epsilon: ε > 0 under add/remove-one.
      replace_one_epsilon: ε under replace-one (default 2ε).
      rho: ε²/8, the zCDP summary that dp_accounting's own RDP accountant uses
        (Cesar & Rogers 2021, Lemma 3.2).
    """

    epsilon: float = attr.ib(default=1.0)
    replace_one_epsilon: float = attr.ib(default=2.0)

    def __init__(self, epsilon: float, replace_one_epsilon: float | None = None) -> None:
        eps = _check_eps("BoundedRangeDpEvent", epsilon)
        r1 = (
            2 * eps
            if replace_one_epsilon is None
            else _check_eps("BoundedRangeDpEvent", replace_one_epsilon)
        )
        self.__attrs_init__(rho=eps * eps / 8.0, xi=0.0, epsilon=eps, replace_one_epsilon=r1)


_OURS = (PureDpEvent, BoundedRangeDpEvent)


# ----------------------------------------------------------------------------- Rényi curves


def _softplus(x: np.ndarray | float) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^{-x}) for x > 0."""
    x = np.asarray(x, np.float64)
    return np.where(x < math.log(2.0), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))


def pure_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """The exact Rényi curve of ε-DP (binary randomized response), orders > 1."""
    a = np.asarray(orders, np.float64)
    lp, lq = -_softplus(-epsilon), -_softplus(epsilon)
    return np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


def bounded_range_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """The exact Rényi curve of ε-bounded range (Cesar & Rogers 2021), orders > 1."""
    a = np.asarray(orders, np.float64)
    e = float(epsilon)
    log_x = (
        np.log(a - 1) - np.log(a) + e + _log1mexp(a * e) - _log1mexp((a - 1) * e)
    )  # log x*, in (0, ε)
    log_f = (a - 1) * log_x + _log1mexp(a * e) - np.log(a) - _log1mexp(np.asarray(e))
    return np.maximum(log_f, 0.0) / (a - 1)


def _renyi(p: np.ndarray, q: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """D_α(p || q) of discrete laws (last axis = outcomes), for every order."""
    orders = np.asarray(orders, np.float64)
    a = orders.reshape((-1,) + (1,) * p.ndim)
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lq = np.log(p), np.log(q)
        terms = np.where(p > 0, a * lp + (1 - a) * lq, -np.inf)
    top = np.max(terms, axis=-1, keepdims=True)
    lse = top[..., 0] + np.log(np.sum(np.exp(terms - top), axis=-1))
    return np.maximum(lse, 0.0) / (orders.reshape((-1,) + (1,) * (p.ndim - 1)) - 1)


def _subsampled_rdp(p: np.ndarray, q: np.ndarray, rate: float, orders: np.ndarray) -> np.ndarray:
    """max over directions of D_α(rate p + (1-rate) q || q) (Zhu, Dong & Wang 2022)."""
    mix = rate * p + (1 - rate) * q
    return np.maximum(_renyi(mix, q, orders), _renyi(q, mix, orders))


def _br_pairs(epsilon: float, num: int) -> tuple[np.ndarray, np.ndarray]:
    """The two-outcome ε-BR pairs with losses t, t - ε, for t on a grid of (0, ε)."""
    t = np.linspace(0.0, epsilon, num + 2)[1:-1]
    # q1 = (e^{-t} - e^{-ε}) / (1 - e^{-ε}); p1 = e^t q1; outcome 2 the rest
    q1 = -np.expm1(-(epsilon - t)) * np.exp(-t) / -np.expm1(-epsilon)
    p1 = np.exp(t) * q1
    return np.stack([p1, 1 - p1], -1), np.stack([q1, 1 - q1], -1)


def subsampled_rdp(kind: type, epsilon: float, rate: float, orders: np.ndarray) -> np.ndarray:
    """The Rényi curve of a sampled pure or bounded-range event."""
    orders = np.asarray(orders, np.float64)
    if kind is PureDpEvent:
        if rate >= 1:
            return pure_rdp(epsilon, orders)
        p, q = _rr_pair(epsilon)
        return _subsampled_rdp(p, q, rate, orders)
    if rate >= 1:
        return bounded_range_rdp(epsilon, orders)
    p, q = _br_pairs(epsilon, _T_GRID)  # [T, 2]
    curves = _subsampled_rdp(p, q, rate, orders)  # [orders, T]
    best = np.argmax(curves, axis=-1)
    # refine each order's maximum on a 64x finer grid between its neighbours
    step = epsilon / (_T_GRID + 1)
    out = np.max(curves, axis=-1)
    for i, j in enumerate(best):
        t = np.linspace(max(j * step, 1e-300), min((j + 2) * step, epsilon), 129)[1:-1]
        q1 = -np.expm1(-(epsilon - t)) * np.exp(-t) / -np.expm1(-epsilon)
        p1 = np.exp(t) * q1
        pp, qq = np.stack([p1, 1 - p1], -1), np.stack([q1, 1 - q1], -1)
        out[i] = max(out[i], float(np.max(_subsampled_rdp(pp, qq, rate, orders[i : i + 1]))))
    return out


# ----------------------------------------------------------------------------- pairs and PLDs


def _rr_pair(epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    hi = 1.0 / (1.0 + math.exp(-epsilon))
    return np.array([hi, 1.0 - hi]), np.array([1.0 - hi, hi])


def bounded_range_envelope(epsilon: float, atoms: int = _ENVELOPE_ATOMS):
    """A discrete pair (p, q) dominating every ε-BR pair (tangents of the envelope).

    The envelope trade-off β(a) = (1 - a) / (1 + c a), c = e^ε - 1, has slope
    -s(a) = -e^ε / (1 + c a)², from -e^ε at a = 0 to -e^-ε at a = 1. Tangents at
    slopes s_i = e^{λ_i}, λ_i evenly spaced from ε down to -ε, meet at a*_i; the
    piecewise-linear maximum of the tangents lies below β (β is convex), and is
    the trade-off curve of the pair with atoms p_i = a*_i - a*_{i-1}, q_i = s_i p_i.
    """
    c = math.expm1(epsilon)
    lam = np.linspace(epsilon, -epsilon, atoms)
    s = np.exp(lam)
    a = (np.sqrt(math.exp(epsilon) / s) - 1.0) / c  # tangent points, 0 .. 1
    a[0], a[-1] = 0.0, 1.0
    beta = (1.0 - a) / (1.0 + c * a)
    # tangent i: y = beta_i - s_i (x - a_i); consecutive tangents meet at x
    x = (beta[:-1] + s[:-1] * a[:-1] - beta[1:] - s[1:] * a[1:]) / (s[:-1] - s[1:])
    cuts = np.concatenate([[0.0], np.clip(x, 0.0, 1.0), [1.0]])
    p = np.diff(cuts)
    q = s * p
    return p / p.sum(), q / q.sum()


def _pmf(upper: np.ndarray, lower: np.ndarray, interval: float) -> tuple[dict[int, float], float]:
    """Rounded-up privacy-loss pmf of log(upper/lower) under upper."""
    keep = upper > 0
    inf_mass = float(np.sum(upper[keep & (lower <= 0)]))
    ok = keep & (lower > 0)
    loss = np.log(upper[ok]) - np.log(lower[ok])
    idx = np.ceil(loss / interval).astype(np.int64)
    uniq, inv = np.unique(idx, return_inverse=True)
    mass = np.zeros(uniq.size)
    np.add.at(mass, inv, upper[ok])
    return {int(i): float(m) for i, m in zip(uniq, mass, strict=True)}, inf_mass


def pair_pld(p: np.ndarray, q: np.ndarray, rate: float, interval: float):
    """The PLD of the (sampled) dominating pair (rate p + (1-rate) q, q), both directions."""
    mix = rate * p + (1.0 - rate) * q if rate < 1 else p
    remove, inf_remove = _pmf(mix, q, interval)
    add, inf_add = _pmf(q, mix, interval)
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        remove, inf_remove, interval, True, add, inf_add, symmetric=False
    )


# ----------------------------------------------------------------------------- traversal


def _as_single(event: Any) -> tuple[type, float, float] | None:
    """(kind, ε, replace-one ε) of one of our events, or of a composition of them
    (then a pure event with the summed ε); None if the tree holds anything else."""
    if isinstance(event, _OURS):
        return type(event), event.epsilon, event.replace_one_epsilon
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        inner = _as_single(event.event)
        if inner is None:
            return None
        if event.count == 1:
            return inner
        return PureDpEvent, event.count * inner[1], event.count * inner[2]
    if isinstance(event, dp_accounting.ComposedDpEvent):
        parts = [_as_single(e) for e in event.events]
        if not parts or any(x is None for x in parts):
            return None
        if len(parts) == 1:
            return parts[0]
        return PureDpEvent, math.fsum(x[1] for x in parts), math.fsum(x[2] for x in parts)
    return None


def _resolve(event: Any, relation: NeighborRel) -> tuple[type, float, float] | _Error | None:
    """(kind, ε for this relation, sampling rate) for our events, bare or sampled.

    Returns None for events that are not ours (the parent accountant handles
    them), or a composition error."""
    if isinstance(event, _OURS):
        if relation is NeighborRel.ADD_OR_REMOVE_ONE:
            return type(event), event.epsilon, 1.0
        if relation is NeighborRel.REPLACE_ONE:
            return type(event), event.replace_one_epsilon, 1.0
        return _Error(
            event, f"jaxdp events support ADD_OR_REMOVE_ONE and REPLACE_ONE, not {relation}"
        )
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        inner = _as_single(event.event)
        if inner is None:
            return None
        if relation is not NeighborRel.ADD_OR_REMOVE_ONE:
            return _Error(
                event,
                f"Poisson sampling of a jaxdp event needs ADD_OR_REMOVE_ONE, found {relation}",
            )
        return inner[0], inner[1], float(event.sampling_probability)
    if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
        inner = _as_single(event.event)
        if inner is None:
            return None
        if relation is not NeighborRel.REPLACE_ONE:
            return _Error(
                event,
                f"fixed-size sampling of a jaxdp event needs REPLACE_ONE, found {relation}",
            )
        rate = event.sample_size / event.source_dataset_size
        return inner[0], inner[2], float(rate)
    return None


class RdpAccountant(rdp_privacy_accountant.RdpAccountant):
    """dp_accounting's RDP accountant, plus jaxdp's events by their exact Rényi curves.

    Accepts :class:`PureDpEvent` and :class:`BoundedRangeDpEvent` bare, inside
    ``PoissonSampledDpEvent`` (``ADD_OR_REMOVE_ONE``) and inside
    ``SampledWithoutReplacementDpEvent`` (``REPLACE_ONE``), and composed with
    anything dp_accounting's accountant accepts. See :mod:`jaxdp.accounting`.
    """

    def _maybe_compose(self, event, count, do_compose):
        found = _resolve(event, self._neighboring_relation)
        if found is None:
            return super()._maybe_compose(event, count, do_compose)
        if isinstance(found, _Error):
            return found
        kind, eps, rate = found
        if do_compose and rate > 0:
            self._rdp += count * subsampled_rdp(kind, eps, min(rate, 1.0), self._orders)
        return None


class PLDAccountant(pld_privacy_accountant.PLDAccountant):
    """dp_accounting's PLD accountant, plus jaxdp's events by their dominating pairs.

    :class:`PureDpEvent`: binary randomized response (exact).
    :class:`BoundedRangeDpEvent`: the envelope pair of all ε-BR pairs,
    discretised pessimistically. Bare, Poisson-sampled (``ADD_OR_REMOVE_ONE``) or
    sampled without replacement (``REPLACE_ONE``). See :mod:`jaxdp.accounting`.
    """

    def _maybe_compose(self, event, count, do_compose):
        found = _resolve(event, self.neighboring_relation)
        if found is None:
            return super()._maybe_compose(event, count, do_compose)
        if isinstance(found, _Error):
            return found
        kind, eps, rate = found
        if do_compose and rate > 0:
            p, q = _rr_pair(eps) if kind is PureDpEvent else bounded_range_envelope(eps)
            pld = pair_pld(p, q, min(rate, 1.0), self._value_discretization_interval)
            self._pld = self._pld.compose(pld.self_compose(count) if count > 1 else pld)
        return None
