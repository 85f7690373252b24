"""Accuracy of the selection mechanisms: utility bounds and exact expected score gaps.

Everything here is float64 NumPy on concrete inputs (no JAX): these are the
reference values that studies and tests compare samplers against.

* :func:`exponential_utility_bound`: the gap g(t) with P[score <= OPT - g(t)]
  <= e^-t (McSherry & Talwar 2007; Dwork & Roth 2014, Thm 3.11).
* :func:`laplace_tail_bound`: the Laplace tail, P[max_i |Y_i| >= a] <= beta.
* The exact law and expected score gap ``E[OPT - s_R]`` of
  :func:`exponential <jaxdp.exponential>` (closed form),
  :func:`permute_and_flip <jaxdp.permute_and_flip>` and
  :func:`report_noisy_max <jaxdp.report_noisy_max>` (one-dimensional integrals,
  by adaptive Gauss-Legendre quadrature).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "exponential_expected_gap",
    "exponential_probs",
    "exponential_utility_bound",
    "laplace_tail_bound",
    "permute_and_flip_expected_gap",
    "permute_and_flip_probs",
    "report_noisy_max_expected_gap",
    "report_noisy_max_probs",
]

# ----------------------------------------------------------------------------- checks


def _positive(fn: str, name: str, value: Any) -> np.ndarray | float:
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{fn}: {name} must be finite and > 0, got {value!r}")
    try:
        arr = np.asarray(value, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: {name} must be a real number, got {value!r}") from err
    if arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"{fn}: {name} must be finite and > 0, got {value!r}")
    return arr[()] if arr.ndim == 0 else arr


def _int(fn: str, name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {value!r}")
    try:
        k = operator.index(value)
    except TypeError as err:
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {value!r}") from err
    if k < minimum:
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {k}")
    return k


def _scores(fn: str, scores: Any) -> np.ndarray:
    """1-d float64 scores; -inf allowed (never selected), NaN/+inf raise."""
    try:
        s = np.asarray(scores, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: scores must be a 1-d real array, got {scores!r}") from err
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"{fn}: scores must be a non-empty 1-d array, got shape {s.shape}")
    if np.any(np.isnan(s) | (s == np.inf)):
        raise ValueError(f"{fn}: scores must not contain NaN or +inf, got {s}")
    if not np.any(np.isfinite(s)):
        raise ValueError(f"{fn}: scores need at least one finite value; all are -inf")
    return s


def _scale(fn: str, epsilon: Any, sensitivity: Any, monotonic: bool) -> float:
    """The noise scale b = 2Δ/ε (Δ/ε when monotonic), as a Python float."""
    eps = _positive(fn, "epsilon", epsilon)
    sens = _positive(fn, "sensitivity", sensitivity)
    if np.ndim(eps) or np.ndim(sens):
        raise ValueError(f"{fn}: epsilon and sensitivity must be scalars here")
    return float((1.0 if monotonic else 2.0) * sens / eps)


# ----------------------------------------------------------------------------- bounds


def exponential_utility_bound(
    epsilon: Any,
    sensitivity: Any,
    num_outcomes: int,
    t: Any,
    num_optimal: int = 1,
    *,
    monotonic: bool = False,
) -> Any:
    r"""The score gap g(t) that the exponential mechanism exceeds with probability <= e^-t.

    .. math::

        g(t) = \frac{2\Delta}{\varepsilon}\left(\ln\frac{|R|}{|R_{\mathrm{OPT}}|}
               + t\right), \qquad
        \Pr\left[s_R \le \mathrm{OPT} - g(t)\right] \le e^{-t}

    (:math:`\Delta/\varepsilon` in front when ``monotonic``, matching the factor
    ε/Δ that :func:`jaxdp.exponential` then uses).

    **Privacy.** Not a mechanism: a statement about the accuracy of the
    ε-DP exponential mechanism (McSherry & Talwar 2007; Dwork & Roth 2014,
    Thm 3.11 and Cor 3.12). The bound holds for every score vector; it is nearly
    attained by one optimum and |R| - 1 outcomes all at OPT - g(t).

    Args:
      epsilon: ε > 0 (number or NumPy array; broadcasts).
      sensitivity: Δ > 0 (number or array).
      num_outcomes: int |R| >= 1, the size of the range.
      t: real ``t`` (number or array); the bound is informative for t > 0.
      num_optimal: int in [1, num_outcomes], the number of outcomes with score OPT.
      monotonic: keyword-only bool, see above.

    Returns:
      float64: a Python float for scalar inputs, else a NumPy array.

    Raises:
      ValueError: ε or Δ not finite and > 0; ``num_outcomes`` < 1;
        ``num_optimal`` outside [1, num_outcomes]; non-finite ``t``.

    Examples:
      >>> from jaxdp.utility import exponential_utility_bound
      >>> round(exponential_utility_bound(1.0, 1.0, 1000, 3.0), 4)  # 2 (ln 1000 + 3)
      19.8155

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 3.11.
    """
    fn = "exponential_utility_bound"
    eps = _positive(fn, "epsilon", epsilon)
    sens = _positive(fn, "sensitivity", sensitivity)
    n = _int(fn, "num_outcomes", num_outcomes, 1)
    m = _int(fn, "num_optimal", num_optimal, 1)
    if m > n:
        raise ValueError(f"{fn}: num_optimal must be <= num_outcomes = {n}, got {m}")
    try:
        tt = np.asarray(t, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: t must be a real number or array, got {t!r}") from err
    if not np.all(np.isfinite(tt)):
        raise ValueError(f"{fn}: t must be finite, got {t!r}")
    factor = (1.0 if monotonic else 2.0) * sens / eps
    g = factor * (math.log(n / m) + tt)
    g = np.asarray(g, np.float64)
    return float(g) if g.ndim == 0 else g


def laplace_tail_bound(epsilon: Any, sensitivity: Any, beta: Any, num_queries: int = 1) -> Any:
    r"""The error a that k Laplace(Δ/ε) noises all stay below with probability >= 1 - β.

    .. math::

        \Pr[|Y| \ge t\,b] = e^{-t} \text{ for } Y \sim \mathrm{Lap}(b), \qquad
        \Pr\Big[\max_{i \le k} |Y_i| \ge \ln(k/\beta)\,\tfrac{\Delta}{\varepsilon}\Big]
        \le \beta

    (exact for k = 1, a union bound beyond). The same tail gives the accuracy of
    report-noisy-max with Lap(b) noise: with probability >= 1 - β every one of
    the n noises is below b ln(n/β), so the selected score is within
    2 b ln(n/β) of OPT; call ``2 * laplace_tail_bound(epsilon, 2 * sensitivity,
    beta, n)`` for b = 2Δ/ε.

    **Privacy.** Not a mechanism: the accuracy of the ε-DP Laplace mechanism
    with noise Lap(Δ/ε) (Dwork & Roth 2014, Fact 3.7 and Thm 3.8).

    Args:
      epsilon: ε > 0 (number or array).
      sensitivity: Δ > 0, the L1 sensitivity (number or array).
      beta: failure probability in (0, 1] (number or array).
      num_queries: int k >= 1, the number of noisy coordinates.

    Returns:
      float64 ``ln(k / β) Δ / ε``: a Python float for scalar inputs, else an array.

    Raises:
      ValueError: ε or Δ not finite and > 0; β outside (0, 1]; k < 1.

    Examples:
      >>> from jaxdp.utility import laplace_tail_bound
      >>> round(laplace_tail_bound(0.5, 1.0, 0.05), 4)  # 2 ln 20
      5.9915

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, Thm 3.8.
    """
    fn = "laplace_tail_bound"
    eps = _positive(fn, "epsilon", epsilon)
    sens = _positive(fn, "sensitivity", sensitivity)
    b = _positive(fn, "beta", beta)
    if np.any(np.asarray(b) > 1):
        raise ValueError(f"{fn}: beta must be in (0, 1], got {beta!r}")
    k = _int(fn, "num_queries", num_queries, 1)
    out = np.asarray(np.log(k / np.asarray(b)) * sens / eps, np.float64)
    return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------- quadrature

_GAUSS = {m: np.polynomial.legendre.leggauss(m) for m in (10, 20)}
_CHUNK = 1 << 20  # nodes x components evaluated at once


def _rule(f: Callable[[np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray, width: int, m: int):
    """m-point Gauss-Legendre on each panel [a_i, b_i]: returns [panels, components]."""
    nodes, weights = _GAUSS[m]
    half = 0.5 * (b - a)
    mid = 0.5 * (a + b)
    x = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
    rows = max(1, _CHUNK // max(width, 1))
    values = np.concatenate([f(x[i : i + rows]) for i in range(0, x.size, rows)], axis=0)
    values = values.reshape(a.size, m, -1)
    return half[:, None] * np.einsum("pnc,n->pc", values, weights)


def _integrate(
    f: Callable[[np.ndarray], np.ndarray],
    edges: np.ndarray,
    atol: np.ndarray,
    *,
    rtol: float = 1e-13,
    nodes: int = 20,
    max_levels: int = 50,
    max_panels: int = 1 << 16,
) -> np.ndarray:
    """Adaptive composite Gauss-Legendre of a vector integrand over ``[edges[0], edges[-1]]``.

    Each panel is compared with its two halves; a panel is accepted when every
    component ``c`` agrees to ``max(rtol * |total_c|, atol_c)`` scaled by the
    panel's share of the interval. An m-point rule is exact for polynomials of
    degree <= 2m - 1.
    """
    a, b = edges[:-1].astype(np.float64), edges[1:].astype(np.float64)
    width = atol.size
    length = float(edges[-1] - edges[0])
    coarse = _rule(f, a, b, width, nodes)
    total = np.zeros(coarse.shape[1])
    for level in range(max_levels):
        mid = 0.5 * (a + b)
        left, right = _rule(f, a, mid, width, nodes), _rule(f, mid, b, width, nodes)
        fine = left + right
        estimate = np.abs(total + fine.sum(axis=0))
        tol = np.maximum(rtol * estimate, atol)[None, :] * ((b - a) / length)[:, None]
        # below a few ulps of the panel's own value, halving cannot help: roundoff
        tol = np.maximum(tol, 64 * np.finfo(np.float64).eps * np.abs(fine))
        ok = np.all(np.abs(fine - coarse) <= tol, axis=1)
        if level == max_levels - 1 or 2 * np.count_nonzero(~ok) > max_panels:
            ok[:] = True
        total = total + fine[ok].sum(axis=0)
        if np.all(ok):
            break
        bad = ~ok
        a, b = np.concatenate([a[bad], mid[bad]]), np.concatenate([mid[bad], b[bad]])
        coarse = np.concatenate([left[bad], right[bad]])
    return total


# ----------------------------------------------------------------------------- laws


def _grouped_logits(s: np.ndarray, b: float):
    """Distinct finite logits u = s / b - max (descending, u[0] = 0), multiplicities,
    and the group of each finite score."""
    logits = s[np.isfinite(s)] / b
    u, inverse, counts = np.unique(-logits, return_inverse=True, return_counts=True)
    u = -u
    return u - u[0], counts.astype(np.float64), inverse


def _spread(s: np.ndarray, b: float, group_probs: np.ndarray) -> np.ndarray:
    """Per-outcome probabilities from the probabilities of the groups of equal scores."""
    _, counts, inverse = _grouped_logits(s, b)
    out = np.zeros(s.shape)
    out[np.isfinite(s)] = (group_probs[: counts.size] / counts)[inverse]
    return out


def _atol(num_groups: int, gaps: np.ndarray | None) -> np.ndarray:
    """Probabilities to 1e-17 absolute; an expected gap (one component) to rtol alone."""
    return np.full(num_groups, 1e-17) if gaps is None else np.array([1e-300])


def exponential_probs(
    scores: Any, *, epsilon: Any, sensitivity: Any, monotonic: bool = False
) -> np.ndarray:
    r"""The exact law of :func:`jaxdp.exponential`, in float64.

    .. math::

        p_r = \frac{\exp(\varepsilon s_r / (2\Delta))}
                   {\sum_{r'} \exp(\varepsilon s_{r'} / (2\Delta))}

    computed with the maximum subtracted first (:math:`\varepsilon s_r/\Delta`
    when ``monotonic``).

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` has probability 0.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      ``[n]`` float64 probabilities summing to 1.

    Raises:
      ValueError: bad scores (not 1-d, empty, NaN or +inf, all -inf), ε or Δ.

    Examples:
      >>> from jaxdp.utility import exponential_probs
      >>> exponential_probs([0.0, 0.0], epsilon=1.0, sensitivity=1.0).tolist()
      [0.5, 0.5]

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_probs"
    s = _scores(fn, scores)
    b = _scale(fn, epsilon, sensitivity, monotonic)
    logits = s / b
    logits = logits - np.max(logits)
    w = np.exp(logits)
    return w / math.fsum(w)


def permute_and_flip_probs(
    scores: Any, *, epsilon: Any, sensitivity: Any, monotonic: bool = False
) -> np.ndarray:
    r"""The exact law of :func:`jaxdp.permute_and_flip`, in float64.

    With :math:`q_r = \exp((s_r - s^*)/b)`, :math:`b = 2\Delta/\varepsilon`
    (Δ/ε if monotonic), permute-and-flip equals report-noisy-max with Exp(b)
    noise (Ding et al. 2021), whose law is

    .. math::

        p_r = q_r \int_0^1 \prod_{j \ne r} (1 - q_j z)\, dz .

    The integrand is a polynomial of degree n - 1, integrated by adaptive
    composite Gauss-Legendre quadrature (20 nodes per panel: exact for n <= 40;
    beyond, panels are halved until the estimates agree to 1e-13 relative).
    Equal scores are grouped, so the cost is O(U x nodes) for U distinct scores.

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` has probability 0.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      ``[n]`` float64 probabilities.

    Raises:
      ValueError: bad scores, ε or Δ.

    Examples:
      >>> import math
      >>> from jaxdp.utility import permute_and_flip_probs
      >>> p = permute_and_flip_probs([0.0, -2.0], epsilon=1.0, sensitivity=1.0)
      >>> bool(abs(p[1] - math.exp(-1) / 2) < 1e-15)  # q / 2 for two outcomes
      True

    References:
      R. McKenna and D. Sheldon, `Permute-and-Flip: A new mechanism for
      differentially private selection <https://arxiv.org/abs/2010.12603>`_,
      NeurIPS 2020.
      Z. Ding, D. Kifer, et al., `The Permute-and-Flip Mechanism is Identical to
      Report-Noisy-Max with Exponential Noise <https://arxiv.org/abs/2105.07260>`_, 2021.
    """
    fn = "permute_and_flip_probs"
    s = _scores(fn, scores)
    b = _scale(fn, epsilon, sensitivity, monotonic)
    return _spread(s, b, _pf_groups(s, b))


def _pf_groups(s: np.ndarray, b: float, gaps: np.ndarray | None = None) -> np.ndarray:
    u, m, _ = _grouped_logits(s, b)
    q = np.exp(u)

    def integrand(z):
        logs = np.log1p(-q[None, :] * z[:, None])  # [nodes, U]
        total = logs @ m
        vals = m[None, :] * q[None, :] * np.exp(total[:, None] - logs)
        return vals if gaps is None else (vals @ gaps)[:, None]

    mass = float(np.sum(m * q))
    # the integrand decays like exp(-mass * z): grade the panels towards 0
    edges = np.unique(np.concatenate([[0.0], np.minimum(2.0 ** np.arange(-20, 1) * 40 / mass, 1)]))
    edges = edges[edges <= 1.0]
    if edges[-1] < 1.0:
        edges = np.append(edges, 1.0)
    return _integrate(integrand, edges, _atol(u.size, gaps))


def report_noisy_max_probs(
    scores: Any,
    *,
    epsilon: Any,
    sensitivity: Any,
    noise: str = "laplace",
    monotonic: bool = False,
) -> np.ndarray:
    r"""The exact law of :func:`jaxdp.report_noisy_max`, in float64.

    ``noise="gumbel"`` is :func:`exponential_probs`; ``"exponential"`` is
    :func:`permute_and_flip_probs`. For ``"laplace"``, with logits
    :math:`u_j = s_j / b` and :math:`b = 2\Delta/\varepsilon` (Δ/ε if monotonic),

    .. math::

        p_r = \int_{-\infty}^{\infty} f(x - u_r) \prod_{j \ne r} F(x - u_j)\, dx

    with f, F the standard Laplace density and CDF. It is integrated over
    :math:`[u^* - 45, u^* + 45]` (the rest holds less than n e^{-45}) by adaptive
    Gauss-Legendre quadrature with panels split at the kinks :math:`u_j`
    (up to 2,000 distinct scores; beyond, adaptivity alone), to 1e-13 relative.
    This is numerical integration, not a closed form; cost O(U x nodes).

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` has probability 0.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      noise: ``"laplace"``, ``"gumbel"`` or ``"exponential"``.
      monotonic: keyword-only bool.

    Returns:
      ``[n]`` float64 probabilities.

    Raises:
      ValueError: bad scores, ε, Δ or ``noise``.

    Examples:
      >>> import math
      >>> from jaxdp.utility import report_noisy_max_probs
      >>> p = report_noisy_max_probs([0.0, -2.0], epsilon=1.0, sensitivity=1.0)
      >>> bool(abs(p[1] - 3 * math.exp(-1) / 4) < 1e-13)  # (2 + d) e^-d / 4, d = 1
      True

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.3.
    """
    fn = "report_noisy_max_probs"
    noise = _noise(fn, noise)
    if noise == "gumbel":
        return exponential_probs(
            scores, epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic
        )
    if noise == "exponential":
        return permute_and_flip_probs(
            scores, epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic
        )
    s = _scores(fn, scores)
    b = _scale(fn, epsilon, sensitivity, monotonic)
    return _spread(s, b, _laplace_groups(s, b))


def _noise(fn: str, noise: Any) -> str:
    if noise not in ("laplace", "gumbel", "exponential"):
        raise ValueError(
            f"{fn}: noise must be one of ['laplace', 'gumbel', 'exponential'], got {noise!r}"
        )
    return noise


_HALF_WIDTH = 45.0
_MAX_KINKS = 2000
_LN2 = math.log(2.0)


def _laplace_groups(s: np.ndarray, b: float, gaps: np.ndarray | None = None) -> np.ndarray:
    u, m, _ = _grouped_logits(s, b)  # u[0] == 0 is the maximum

    def log_cdf(y):
        neg = np.minimum(y, 0.0)
        pos = np.maximum(y, 0.0)
        return np.where(y < 0, neg - _LN2, np.log1p(-0.5 * np.exp(-pos)))

    mg = None if gaps is None else m * gaps

    def integrand(x):
        y = x[:, None] - u[None, :]  # [nodes, U]
        if mg is None:
            lf = -_LN2 - np.abs(y)
            lF = log_cdf(y)
            return m[None, :] * np.exp(lf + (lF @ m)[:, None] - lF)
        # gap only: prod_j F_j * sum_r g_r f_r / F_r, where f/F = 1 left of the kink
        # and e / (2 - e), e = exp(-y), right of it
        e = np.exp(-np.abs(y))
        left = y < 0
        lF = np.where(left, y - _LN2, np.log1p(-0.5 * e))
        ratio = np.where(left, 1.0, e / (2.0 - e))
        return (np.exp(lF @ m) * (ratio @ mg))[:, None]

    lo, hi = -_HALF_WIDTH, _HALF_WIDTH
    grid = np.arange(lo, hi + 1.0, 1.0)
    kinks = u[(u > lo) & (u < hi)]
    if kinks.size > _MAX_KINKS:
        kinks = kinks[:: int(math.ceil(kinks.size / _MAX_KINKS))]
    edges = np.unique(np.concatenate([grid, kinks, [lo, hi]]))
    # between kinks the integrand is analytic: a 10-point rule per panel suffices
    return _integrate(integrand, edges, _atol(u.size, gaps), nodes=10)


# ----------------------------------------------------------------------------- gaps


def _gap_from(s: np.ndarray, b: float, groups: Callable) -> float:
    u, _, _ = _grouped_logits(s, b)
    gaps = -u * b  # OPT - s for each group, in score units
    if gaps.size == 1:
        return 0.0
    out = groups(s, b, gaps)
    return float(max(out[0], 0.0))


def exponential_expected_gap(
    scores: Any, *, epsilon: Any, sensitivity: Any, monotonic: bool = False
) -> float:
    r"""The exact expected score gap of :func:`jaxdp.exponential`.

    .. math::

        \mathbb{E}[\mathrm{OPT} - s_R] = \sum_r p_r\,(\mathrm{OPT} - s_r)

    with :math:`p` from :func:`exponential_probs` (a closed form, O(n)).

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` outcomes are never selected.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      float, the expected gap (>= 0) in score units.

    Raises:
      ValueError: bad scores, ε or Δ.

    Examples:
      >>> from jaxdp.utility import exponential_expected_gap
      >>> round(exponential_expected_gap([0.0, -2.0], epsilon=1.0, sensitivity=1.0), 6)
      0.537883

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_expected_gap"
    s = _scores(fn, scores)
    p = exponential_probs(s, epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)
    finite = np.isfinite(s)
    g = np.max(s[finite]) - s[finite]
    return float(math.fsum(p[finite] * g))


def permute_and_flip_expected_gap(
    scores: Any, *, epsilon: Any, sensitivity: Any, monotonic: bool = False
) -> float:
    r"""The exact expected score gap of :func:`jaxdp.permute_and_flip`.

    .. math::

        \mathbb{E}[\mathrm{OPT} - s_R] = \int_0^1 \sum_r (\mathrm{OPT} - s_r)\, q_r
        \prod_{j \ne r} (1 - q_j z)\, dz

    by the quadrature of :func:`permute_and_flip_probs` (exact for n <= 40, else
    to 1e-13 relative). McKenna & Sheldon (2020, Thm 2) prove it is never larger
    than :func:`exponential_expected_gap` for the same scores and ε.

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` outcomes are never selected.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      float, the expected gap (>= 0) in score units.

    Raises:
      ValueError: bad scores, ε or Δ.

    Examples:
      >>> from jaxdp.utility import permute_and_flip_expected_gap
      >>> round(permute_and_flip_expected_gap([0.0, -2.0], epsilon=1.0, sensitivity=1.0), 6)
      0.367879

    References:
      R. McKenna and D. Sheldon, `Permute-and-Flip: A new mechanism for
      differentially private selection <https://arxiv.org/abs/2010.12603>`_,
      NeurIPS 2020.
    """
    fn = "permute_and_flip_expected_gap"
    s = _scores(fn, scores)
    b = _scale(fn, epsilon, sensitivity, monotonic)
    return _gap_from(s, b, _pf_groups)


def report_noisy_max_expected_gap(
    scores: Any,
    *,
    epsilon: Any,
    sensitivity: Any,
    noise: str = "laplace",
    monotonic: bool = False,
) -> float:
    r"""The expected score gap of :func:`jaxdp.report_noisy_max`.

    ``noise="gumbel"`` is :func:`exponential_expected_gap` and
    ``"exponential"`` :func:`permute_and_flip_expected_gap`. For ``"laplace"``,

    .. math::

        \mathbb{E}[\mathrm{OPT} - s_R] = \int \sum_r (\mathrm{OPT} - s_r)\,
        f(x - u_r) \prod_{j \ne r} F(x - u_j)\, dx

    by the numerical integration of :func:`report_noisy_max_probs` (1e-13
    relative).

    **Privacy.** A deterministic function of the scores, not a release (not DP).

    Args:
      scores: ``[n]`` real scores; ``-inf`` outcomes are never selected.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      noise: ``"laplace"``, ``"gumbel"`` or ``"exponential"``.
      monotonic: keyword-only bool.

    Returns:
      float, the expected gap (>= 0) in score units.

    Raises:
      ValueError: bad scores, ε, Δ or ``noise``.

    Examples:
      >>> from jaxdp.utility import report_noisy_max_expected_gap
      >>> round(report_noisy_max_expected_gap([0.0, -2.0], epsilon=1.0, sensitivity=1.0), 6)
      0.551819

    References:
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.3.
    """
    fn = "report_noisy_max_expected_gap"
    noise = _noise(fn, noise)
    kw = dict(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)
    if noise == "gumbel":
        return exponential_expected_gap(scores, **kw)
    if noise == "exponential":
        return permute_and_flip_expected_gap(scores, **kw)
    s = _scores(fn, scores)
    b = _scale(fn, epsilon, sensitivity, monotonic)
    return _gap_from(s, b, _laplace_groups)
