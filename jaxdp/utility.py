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
* The exact laws (:class:`PiecewiseLaw`, with a CDF) and expected errors of the
  continuous mechanisms, from the closed forms their samplers use:
  :func:`exponential_piecewise_law` / :func:`exponential_piecewise_expected_gap`,
  :func:`private_price_law` / :func:`private_price_expected_loss` (revenue
  loss), :func:`private_quantile_law` / :func:`private_quantile_error` (rank and
  value errors, and the law of the rank error).
* :func:`goodness_of_fit`: chi-square or Kolmogorov-Smirnov test of draws
  against an exact law (needs scipy, imported when called).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "GoodnessOfFit",
    "PiecewiseLaw",
    "QuantileError",
    "exponential_expected_gap",
    "exponential_piecewise_expected_gap",
    "exponential_piecewise_law",
    "exponential_probs",
    "exponential_utility_bound",
    "laplace_tail_bound",
    "permute_and_flip_expected_gap",
    "goodness_of_fit",
    "permute_and_flip_probs",
    "private_price_expected_loss",
    "private_price_law",
    "private_quantile_error",
    "private_quantile_law",
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


# ----------------------------------------------------------------------------- continuous laws


class PiecewiseLaw(NamedTuple):
    r"""The exact law of a piecewise log-linear density on ``[edges[0], edges[-1]]``.

    The law of :func:`jaxdp.exponential_piecewise`, :func:`jaxdp.private_price`
    and :func:`jaxdp.private_quantile`: interval j ``[edges[j], edges[j+1]]``
    is drawn with probability ``probs[j]``; inside it the density is
    proportional to :math:`e^{-y_j f}` in the fraction ``f`` of the width
    measured from the end of larger density (``right[j]``: the right end), with
    :math:`y_j` = ``drops[j]`` >= 0 the fall of the log-density across it (0:
    uniform). All float64.

    Attributes:
      edges: ``[m+1]`` non-decreasing edges.
      probs: ``[m]`` interval probabilities, summing to 1 (0 for zero width).
      drops: ``[m]`` the fall of the log-density across each interval.
      right: ``[m]`` bool, the density is larger at the right end.
    """

    edges: np.ndarray
    probs: np.ndarray
    drops: np.ndarray
    right: np.ndarray

    def cdf(self, x: Any) -> np.ndarray:
        """The CDF at ``x`` (any shape), exact in float64; usable with
        :func:`goodness_of_fit` (``cdf=law.cdf``)."""
        x = np.asarray(x, np.float64)
        a, b = self.edges[:-1], self.edges[1:]
        before = np.concatenate([[0.0], np.cumsum(self.probs)])
        j = np.clip(np.searchsorted(self.edges, x, side="right") - 1, 0, self.probs.size - 1)
        w = (b - a)[j]
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.clip(np.where(w > 0, (x - a[j]) / w, 1.0), 0.0, 1.0)
        y, right = self.drops[j], self.right[j]
        # mass of [a, x] within the interval: from the high end if it is the left one
        from_high = np.where(right, 1.0 - f, f)
        share = _truncexp_cdf(from_high, y)
        inside = np.where(right, 1.0 - share, share)
        out = before[j] + self.probs[j] * inside
        out = np.where(x < self.edges[0], 0.0, np.where(x >= self.edges[-1], 1.0, out))
        return np.clip(out, 0.0, 1.0)

    def interval_means(self) -> np.ndarray:
        """``E[r | interval j]`` for every interval (its midpoint when empty)."""
        a, b = self.edges[:-1], self.edges[1:]
        d = (b - a) * _truncexp_mean(self.drops)
        return np.where(self.right, b - d, a + d)

    def mean(self) -> float:
        """``E[r]``."""
        return float(math.fsum(self.probs * self.interval_means()))


def _truncexp_cdf(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P[F <= f] for F on [0, 1] with density ∝ e^{-y F} (uniform when y = 0)."""
    small = y < 1e-12
    safe = np.where(small, 1.0, y)
    return np.where(small, f, np.expm1(-safe * f) / np.expm1(-safe))


def _truncexp_mean(y: np.ndarray) -> np.ndarray:
    """E[F] for F on [0, 1] with density ∝ e^{-y F}: 1/y - 1/(e^y - 1) (1/2 at y = 0)."""
    y = np.asarray(y, np.float64)
    small = y < 1e-4
    safe = np.where(small, 1.0, y)
    big = 1.0 / safe - np.where(safe > 700, 0.0, 1.0 / np.expm1(np.minimum(safe, 700)))
    return np.where(small, 0.5 - y / 12.0, big)


def _piecewise(
    edges: np.ndarray, upper: np.ndarray, drops: np.ndarray, right: np.ndarray
) -> PiecewiseLaw:
    """The law from per-interval log-density at the larger end (any offset) and drops."""
    a, b = edges[:-1], edges[1:]
    width = b - a
    with np.errstate(divide="ignore"):
        log_w = np.log(np.where(width > 0, width, 0.0))
    small = drops < 1e-3
    safe = np.where(small, 1.0, drops)
    shape = np.where(small, drops * (-0.5 + drops / 24.0), np.log(-np.expm1(-safe)) - np.log(safe))
    log_mass = np.where((width > 0) & np.isfinite(upper), upper + log_w + shape, -np.inf)
    top = np.max(log_mass)
    w = np.exp(log_mass - top)
    return PiecewiseLaw(edges, w / math.fsum(w), drops, right.astype(bool))


def _scalar_positive(fn: str, name: str, value: Any) -> float:
    v = _positive(fn, name, value)
    if np.ndim(v):
        raise ValueError(f"{fn}: {name} must be a scalar, got shape {np.shape(v)}")
    return float(v)


def _bounds(fn: str, bounds: Any, *, nonneg: bool = False) -> tuple[float, float]:
    try:
        arr = np.asarray(bounds, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: bounds must be a pair (lo, hi), got {bounds!r}") from err
    if arr.shape != (2,) or not np.all(np.isfinite(arr)) or not arr[0] < arr[1]:
        raise ValueError(f"{fn}: bounds must be a finite pair with lo < hi, got {bounds!r}")
    if nonneg and arr[0] < 0:
        raise ValueError(f"{fn}: bounds must have lo >= 0, got {bounds!r}")
    return float(arr[0]), float(arr[1])


def _data(fn: str, name: str, data: Any, lo: float, hi: float) -> np.ndarray:
    try:
        x = np.asarray(data, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: {name} must be a 1-d real array, got {data!r}") from err
    if x.ndim != 1:
        raise ValueError(f"{fn}: {name} must be 1-d, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{fn}: {name} must be finite")
    return np.sort(np.clip(x, lo, hi))


def exponential_piecewise_law(
    edges: Any,
    intercepts: Any,
    slopes: Any,
    *,
    epsilon: Any,
    sensitivity: Any,
    monotonic: bool = False,
) -> PiecewiseLaw:
    r"""The exact law of :func:`jaxdp.exponential_piecewise`, in float64.

    .. math::

        P[\text{interval } j] \propto \int_{e_j}^{e_{j+1}} e^{k u(r)}\,dr
        = e^{k U_j}\, w_j\, \frac{1 - e^{-y_j}}{y_j},
        \qquad k = \frac{\varepsilon}{2\Delta}\ (\varepsilon/\Delta \text{ if monotonic}),

    with :math:`U_j` the larger end value of u on the interval, :math:`w_j` its
    width and :math:`y_j = k |m_j| w_j` — the closed form the sampler uses, here
    in float64 log space.

    **Privacy.** A deterministic function of its inputs, not a release (not DP).

    Args:
      edges: ``[m+1]`` finite, non-decreasing, ``edges[-1] > edges[0]``.
      intercepts: ``[m]``; ``-inf`` excludes an interval.
      slopes: ``[m]`` finite.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      :class:`PiecewiseLaw` (``.cdf``, ``.mean``, interval probabilities).

    Raises:
      ValueError: bad shapes or values, no interval of positive mass, ε or Δ.

    Examples:
      >>> from jaxdp.utility import exponential_piecewise_law
      >>> law = exponential_piecewise_law([0.0, 1.0], [0.0], [0.0], epsilon=1.0,
      ...                                 sensitivity=1.0)
      >>> float(law.cdf(0.25)), law.mean()
      (0.25, 0.5)

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_piecewise_law"
    e, c, m, k = _piecewise_args(fn, edges, intercepts, slopes, epsilon, sensitivity, monotonic)
    return _piecewise_law_from(e, c, m, k)


def _piecewise_args(fn, edges, intercepts, slopes, epsilon, sensitivity, monotonic):
    eps = _scalar_positive(fn, "epsilon", epsilon)
    sens = _scalar_positive(fn, "sensitivity", sensitivity)
    if not isinstance(monotonic, (bool, np.bool_)):
        raise ValueError(f"{fn}: monotonic must be a bool, got {monotonic!r}")
    try:
        e = np.asarray(edges, np.float64)
        c = np.asarray(intercepts, np.float64)
        m = np.asarray(slopes, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: edges, intercepts and slopes must be real arrays") from err
    if e.ndim != 1 or e.size < 2 or c.shape != (e.size - 1,) or m.shape != (e.size - 1,):
        raise ValueError(
            f"{fn}: need edges [m+1] (m >= 1), intercepts [m] and slopes [m]; got shapes "
            f"{e.shape}, {c.shape}, {m.shape}"
        )
    if not np.all(np.isfinite(e)) or np.any(np.diff(e) < 0) or not e[-1] > e[0]:
        raise ValueError(f"{fn}: edges must be finite, non-decreasing, with edges[-1] > edges[0]")
    if np.any(np.isnan(c) | (c == np.inf)) or not np.all(np.isfinite(m)):
        raise ValueError(f"{fn}: intercepts must not be NaN or +inf; slopes must be finite")
    if not np.any((np.diff(e) > 0) & (c > -np.inf)):
        raise ValueError(f"{fn}: no interval of positive width with a finite intercept")
    k = (1.0 if monotonic else 0.5) * eps / sens
    return e, c, m, k


def _piecewise_law_from(e, c, m, k):
    a, b = e[:-1], e[1:]
    u_top = np.maximum(c + m * a, c + m * b)
    usable = (b > a) & (c > -np.inf)
    best = np.max(u_top[usable])
    upper = np.where(c > -np.inf, k * (u_top - best), -np.inf)
    drops = np.where(b > a, k * np.abs(m) * (b - a), 0.0)
    return _piecewise(e, upper, drops, m > 0)


def exponential_piecewise_expected_gap(
    edges: Any,
    intercepts: Any,
    slopes: Any,
    *,
    epsilon: Any,
    sensitivity: Any,
    monotonic: bool = False,
) -> float:
    r"""The exact expected utility gap ``OPT - E[u(R)]`` of :func:`jaxdp.exponential_piecewise`.

    .. math::

        \mathbb{E}[u(R)] = \sum_j P_j \big(U_j - |m_j|\, w_j\, g(y_j)\big), \qquad
        g(y) = \frac{1}{y} - \frac{1}{e^{y} - 1}

    (the mean distance, as a fraction of the width, from the high end of a
    truncated exponential; :math:`g(0) = 1/2`), with :math:`P_j`, :math:`U_j`,
    :math:`y_j` as in :func:`exponential_piecewise_law` and OPT the supremum of
    u over the intervals of positive width.

    **Privacy.** A deterministic function of its inputs, not a release (not DP).

    Args:
      edges: ``[m+1]`` finite, non-decreasing.
      intercepts: ``[m]``; ``-inf`` excludes an interval.
      slopes: ``[m]`` finite.
      epsilon: ε > 0.
      sensitivity: Δ > 0.
      monotonic: keyword-only bool.

    Returns:
      float >= 0, in utility units.

    Raises:
      ValueError: as :func:`exponential_piecewise_law`.

    Examples:
      >>> from jaxdp.utility import exponential_piecewise_expected_gap
      >>> round(exponential_piecewise_expected_gap([0.0, 1.0], [0.0], [0.0],
      ...                                          epsilon=1.0, sensitivity=1.0), 6)
      0.0

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_piecewise_expected_gap"
    e, c, m, k = _piecewise_args(fn, edges, intercepts, slopes, epsilon, sensitivity, monotonic)
    law = _piecewise_law_from(e, c, m, k)
    a, b = e[:-1], e[1:]
    u_top = np.maximum(c + m * a, c + m * b)
    usable = (b > a) & (c > -np.inf)
    best = float(np.max(u_top[usable]))
    shortfall = (best - u_top) + np.abs(m) * (b - a) * _truncexp_mean(law.drops)
    keep = law.probs > 0
    return float(max(math.fsum(law.probs[keep] * shortfall[keep]), 0.0))


def private_price_law(bids: Any, *, epsilon: Any, bounds: Any) -> PiecewiseLaw:
    r"""The exact law of :func:`jaxdp.private_price`, in float64.

    Revenue :math:`p \cdot \#\{i: b_i \ge p\}` is linear between sorted bids
    (edges ``[lo, sorted bids, hi]``, slope = the count ``n - j`` on interval j),
    with Δ = ``bounds[1]``, so this is :func:`exponential_piecewise_law` with
    ``epsilon / (2 * hi)``. Bids are clipped to ``bounds`` first.

    **Privacy.** A deterministic function of the bids, not a release (not DP).

    Args:
      bids: ``[n]`` finite bids (n >= 0; none gives the uniform law).
      epsilon: ε > 0.
      bounds: the price interval ``(lo, hi)``, finite, ``0 <= lo < hi``.

    Returns:
      :class:`PiecewiseLaw`.

    Raises:
      ValueError: bad bids, ε or bounds.

    Examples:
      >>> from jaxdp.utility import private_price_law
      >>> law = private_price_law([], epsilon=1.0, bounds=(0.0, 2.0))
      >>> law.mean()
      1.0

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    law, _ = _price(private_price_law.__name__, bids, epsilon, bounds)
    return law


def _price(fn, bids, epsilon, bounds):
    eps = _scalar_positive(fn, "epsilon", epsilon)
    lo, hi = _bounds(fn, bounds, nonneg=True)
    x = _data(fn, "bids", bids, lo, hi)
    n = x.size
    e = np.concatenate([[lo], x, [hi]])
    count = (n - np.arange(n + 1)).astype(np.float64)
    return _piecewise_law_from(e, np.zeros(n + 1), count, eps / (2.0 * hi)), (e, count)


def private_price_expected_loss(bids: Any, *, epsilon: Any, bounds: Any) -> float:
    r"""The exact expected revenue loss ``OPT - E[rev(P)]`` of :func:`jaxdp.private_price`.

    .. math::

        \mathrm{OPT} = \max_j\, (n - j)\, e_{j+1}, \qquad
        \mathbb{E}[\mathrm{rev}(P)] = \sum_j P_j\, (n - j)\, \mathbb{E}[P \mid j]

    with edges ``e = [lo, sorted bids, hi]`` and the closed-form interval means
    of :class:`PiecewiseLaw` (a truncated exponential in each interval).

    **Privacy.** A deterministic function of the bids, not a release (not DP).

    Args:
      bids: ``[n]`` finite bids, clipped to ``bounds``.
      epsilon: ε > 0.
      bounds: ``(lo, hi)``, finite, ``0 <= lo < hi``.

    Returns:
      float >= 0, in revenue units.

    Raises:
      ValueError: bad bids, ε or bounds.

    Examples:
      >>> from jaxdp.utility import private_price_expected_loss
      >>> private_price_expected_loss([], epsilon=1.0, bounds=(0.0, 2.0))
      0.0

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "private_price_expected_loss"
    law, (e, count) = _price(fn, bids, epsilon, bounds)
    best = float(np.max(count * e[1:]))
    expected = math.fsum(law.probs * count * law.interval_means())
    return float(max(best - expected, 0.0))


class QuantileError(NamedTuple):
    """The exact error law of :func:`jaxdp.private_quantile` (:func:`private_quantile_error`).

    Attributes:
      rank_error: ``E|#{x_i < R} - q n|``.
      value_error: ``E|R - target|``.
      squared_value_error: ``E[(R - target)^2]``.
      rank_values: the distinct values of ``|#{x_i < R} - q n|``, ascending.
      rank_probs: their probabilities.
      target: the reference value used for the value errors.
    """

    rank_error: float
    value_error: float
    squared_value_error: float
    rank_values: np.ndarray
    rank_probs: np.ndarray
    target: float


def private_quantile_law(data: Any, q: Any, *, epsilon: Any, bounds: Any) -> PiecewiseLaw:
    r"""The exact law of :func:`jaxdp.private_quantile`, in float64.

    With the data clipped to ``bounds`` and sorted into edges
    ``[lo, x_(1), ..., x_(n), hi]``, interval j (where ``#{x_i < r} = j``) is
    drawn with probability

    .. math::

        P_j \propto (e_{j+1} - e_j)\,
              \exp\Big(-\frac{\varepsilon\,|j - q n|}{2 \max(q, 1 - q)}\Big)

    and the release is uniform inside it (Smith 2011, with the add/remove
    sensitivity max(q, 1 - q) of the design). No data gives the uniform law.

    **Privacy.** A deterministic function of the data, not a release (not DP).

    Args:
      data: ``[n]`` finite values (n >= 0), clipped to ``bounds``.
      q: the quantile in [0, 1].
      epsilon: ε > 0.
      bounds: ``(lo, hi)``, finite, ``lo < hi``.

    Returns:
      :class:`PiecewiseLaw`.

    Raises:
      ValueError: bad data, q, ε or bounds.

    Examples:
      >>> from jaxdp.utility import private_quantile_law
      >>> law = private_quantile_law([], 0.5, epsilon=1.0, bounds=(0.0, 4.0))
      >>> float(law.cdf(1.0))
      0.25

    References:
      A. Smith, `Privacy-preserving Statistical Estimation with Optimal
      Convergence Rates <https://doi.org/10.1145/1993636.1993743>`_, STOC 2011.
    """
    return _quantile("private_quantile_law", data, q, epsilon, bounds)[0]


def _quantile(fn, data, q, epsilon, bounds):
    eps = _scalar_positive(fn, "epsilon", epsilon)
    lo, hi = _bounds(fn, bounds)
    if isinstance(q, bool):
        raise ValueError(f"{fn}: q must be a number in [0, 1], got {q!r}")
    try:
        qq = float(q)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: q must be a number in [0, 1], got {q!r}") from err
    if not 0.0 <= qq <= 1.0:
        raise ValueError(f"{fn}: q must be in [0, 1], got {q!r}")
    x = _data(fn, "data", data, lo, hi)
    n = x.size
    e = np.concatenate([[lo], x, [hi]])
    dist = np.abs(np.arange(n + 1, dtype=np.float64) - qq * n)
    k = eps / (2.0 * max(qq, 1.0 - qq))
    upper = -k * (dist - dist.min())
    law = _piecewise(e, upper, np.zeros(n + 1), np.zeros(n + 1, bool))
    return law, x, dist, qq


def private_quantile_error(
    data: Any, q: Any, *, epsilon: Any, bounds: Any, target: Any = None
) -> QuantileError:
    r"""The exact rank and value errors of :func:`jaxdp.private_quantile`, and the rank law.

    With :math:`P_j` from :func:`private_quantile_law` and the release uniform
    on :math:`[a_j, b_j]`:

    .. math::

        \mathbb{E}\,|\#\{x_i < R\} - qn| = \sum_j P_j\,|j - qn|,\qquad
        \mathbb{E}\,|R - t| = \sum_j P_j\,
        \begin{cases} \frac{(t-a_j)^2 + (b_j-t)^2}{2(b_j-a_j)} & a_j \le t \le b_j\\
        |t - \frac{a_j+b_j}{2}| & \text{otherwise} \end{cases}

    and :math:`\mathbb{E}(R-t)^2 = \sum_j P_j((m_j - t)^2 + w_j^2/12)`, all in
    float64 (``fsum``).

    **Privacy.** A deterministic function of the data, not a release (not DP).

    Args:
      data: ``[n]`` finite values (n >= 0), clipped to ``bounds``.
      q: the quantile in [0, 1].
      epsilon: ε > 0.
      bounds: ``(lo, hi)``, finite, ``lo < hi``.
      target: the reference for the value errors; default the empirical
        quantile ``numpy.quantile(clipped data, q)`` (linear interpolation),
        or the midpoint of ``bounds`` for empty data.

    Returns:
      :class:`QuantileError`.

    Raises:
      ValueError: bad data, q, ε, bounds or target.

    Examples:
      >>> from jaxdp.utility import private_quantile_error
      >>> err = private_quantile_error([], 0.5, epsilon=1.0, bounds=(0.0, 4.0))
      >>> err.rank_error, err.value_error, err.target
      (0.0, 1.0, 2.0)

    References:
      A. Smith, `Privacy-preserving Statistical Estimation with Optimal
      Convergence Rates <https://doi.org/10.1145/1993636.1993743>`_, STOC 2011.
    """
    fn = "private_quantile_error"
    law, x, dist, qq = _quantile(fn, data, q, epsilon, bounds)
    if target is None:
        t = float(np.quantile(x, qq)) if x.size else float(0.5 * (law.edges[0] + law.edges[-1]))
    else:
        try:
            t = float(target)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{fn}: target must be a real number, got {target!r}") from err
        if not math.isfinite(t):
            raise ValueError(f"{fn}: target must be finite, got {target!r}")
    a, b = law.edges[:-1], law.edges[1:]
    w = b - a
    mid = 0.5 * (a + b)
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = ((t - a) ** 2 + (b - t) ** 2) / (2 * w)
    absdev = np.where((a <= t) & (t <= b) & (w > 0), inside, np.abs(t - mid))
    keep = law.probs > 0
    p = law.probs[keep]
    values, inv = np.unique(dist[keep], return_inverse=True)
    probs = np.zeros(values.size)
    np.add.at(probs, inv, p)
    return QuantileError(
        rank_error=float(math.fsum(p * dist[keep])),
        value_error=float(math.fsum(p * absdev[keep])),
        squared_value_error=float(math.fsum(p * ((mid - t) ** 2 + w * w / 12.0)[keep])),
        rank_values=values,
        rank_probs=probs,
        target=t,
    )


# ----------------------------------------------------------------------------- goodness of fit


class GoodnessOfFit(NamedTuple):
    """The result of :func:`goodness_of_fit`.

    Attributes:
      statistic: the chi-square statistic, or the KS distance.
      pvalue: the p-value (0.0 when an outcome of probability 0 was drawn).
      test: ``"chi-square"`` or ``"ks"``.
      num_draws: the number of draws.
      num_bins: the number of bins after pooling (chi-square), else 0.
    """

    statistic: float
    pvalue: float
    test: str
    num_draws: int
    num_bins: int


def goodness_of_fit(
    draws: Any,
    *,
    probs: Any = None,
    cdf: Callable[[np.ndarray], np.ndarray] | None = None,
    min_expected: float = 5.0,
) -> GoodnessOfFit:
    r"""Tests draws against an exact law: chi-square (discrete) or Kolmogorov–Smirnov.

    With ``probs`` (outcomes ``0..n-1``): Pearson's chi-square on the counts,
    outcomes of expected count below ``min_expected`` pooled into one bin; an
    outcome of probability 0 that was drawn gives p-value 0 at once. With
    ``cdf`` (continuous): the one-sample KS test of :func:`scipy.stats.kstest`.
    A small p-value (say < 1e-3 with fixed keys) rejects the law.

    **Privacy.** Not a mechanism: a statistical check for studies and tests.

    Args:
      draws: the samples (any shape; flattened). Integers in ``[0, len(probs))``
        for ``probs``.
      probs: keyword-only, the exact probabilities (``[n]``, >= 0, summing to 1
        within 1e-9).
      cdf: keyword-only, the exact CDF, a vectorised callable (e.g.
        ``private_quantile_law(...).cdf``).
      min_expected: keyword-only, pool outcomes expected fewer times (> 0).

    Returns:
      :class:`GoodnessOfFit` ``(statistic, pvalue, test, num_draws, num_bins)``.

    Raises:
      ImportError: scipy is not installed (``pip install scipy``).
      ValueError: neither or both of ``probs`` and ``cdf``; bad probabilities;
        discrete draws outside ``[0, n)`` or not integers; no draws.

    Examples:
      >>> import numpy as np
      >>> from jaxdp.utility import goodness_of_fit
      >>> draws = np.random.default_rng(0).integers(0, 4, 10_000)
      >>> goodness_of_fit(draws, probs=[0.25] * 4).pvalue > 1e-3
      True
      >>> goodness_of_fit(draws, probs=[0.4, 0.2, 0.2, 0.2]).pvalue < 1e-3
      True

    References:
      K. Pearson, `On the criterion that a given system of deviations ...
      <https://doi.org/10.1080/14786440009463897>`_, Philosophical Magazine, 1900.
      F. J. Massey, `The Kolmogorov-Smirnov Test for Goodness of Fit
      <https://doi.org/10.1080/01621459.1951.10500769>`_, JASA, 1951.
    """
    fn = "goodness_of_fit"
    if (probs is None) == (cdf is None):
        raise ValueError(f"{fn}: give exactly one of probs (discrete) or cdf (continuous)")
    if isinstance(min_expected, bool) or not float(min_expected) > 0:
        raise ValueError(f"{fn}: min_expected must be > 0, got {min_expected!r}")
    try:
        import scipy.stats
    except ImportError as err:
        raise ImportError(f"jaxdp.utility.{fn} needs scipy: pip install scipy") from err
    x = np.asarray(draws).ravel()
    if x.size == 0:
        raise ValueError(f"{fn}: draws must not be empty")
    if cdf is not None:
        if not callable(cdf):
            raise ValueError(f"{fn}: cdf must be callable, got {cdf!r}")
        res = scipy.stats.kstest(x.astype(np.float64), cdf)
        return GoodnessOfFit(float(res.statistic), float(res.pvalue), "ks", int(x.size), 0)
    try:
        p = np.asarray(probs, np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: probs must be a 1-d array of probabilities") from err
    if p.ndim != 1 or p.size == 0 or np.any(~np.isfinite(p) | (p < 0)):
        raise ValueError(f"{fn}: probs must be a non-empty 1-d array of finite values >= 0")
    if abs(math.fsum(p) - 1.0) > 1e-9:
        raise ValueError(f"{fn}: probs must sum to 1, got {math.fsum(p)!r}")
    if not (np.issubdtype(x.dtype, np.integer) or np.all(x == np.round(x))):
        raise ValueError(f"{fn}: discrete draws must be integers")
    x = x.astype(np.int64)
    if np.any((x < 0) | (x >= p.size)):
        raise ValueError(f"{fn}: draws must lie in [0, {p.size}) for {p.size} probabilities")
    counts = np.bincount(x, minlength=p.size)
    if np.any(counts[p == 0] > 0):
        return GoodnessOfFit(math.inf, 0.0, "chi-square", int(x.size), 0)
    expected = p * x.size
    big = expected >= float(min_expected)
    obs = counts[big]
    exp = expected[big]
    if np.any(~big & (p > 0)):
        obs = np.append(obs, counts[~big].sum())
        exp = np.append(exp, expected[~big].sum())
    if obs.size < 2:
        return GoodnessOfFit(0.0, 1.0, "chi-square", int(x.size), int(obs.size))
    res = scipy.stats.chisquare(obs, exp * (obs.sum() / exp.sum()))
    return GoodnessOfFit(
        float(res.statistic), float(res.pvalue), "chi-square", int(x.size), int(obs.size)
    )
