r"""The exponential mechanism over continuous ranges, sampled exactly (no grid).

:func:`exponential_piecewise` draws from a density proportional to
:math:`\exp(k\,u(r))`, :math:`k = \varepsilon/(2\Delta)`, for a utility ``u`` that is
linear on each interval of a partition. Every interval's mass has a closed form,
computed in log space; an interval is picked by the inverse CDF of those masses
(one O(m) prefix sum, then O(log m) per draw) and the point inside it by the
exact inverse CDF of a truncated exponential. :func:`private_price` and
:func:`private_quantile` build the partition from sorted data (O(n log n) once)
and call the same sampler.

Stability. On ``[a, b)`` of width ``w`` let ``U`` be the larger end value of
``k u`` and ``y = k |slope| w >= 0`` its drop across the interval. The mass is

.. math::

    \int_a^b e^{k u(r)}\,dr = e^{U}\, w\, \frac{1 - e^{-y}}{y},
    \qquad \log(\text{mass}) = U + \log w + \psi(y),

with :math:`\psi(y) = \log(-\operatorname{expm1}(-y)) - \log y` (and its series
:math:`-y/2 + y^2/24` for :math:`y < 10^{-3}`), which is finite and smooth for
slopes near 0, zero-width intervals (``log 0 = -inf``: never drawn) and huge ε
(``y`` up to the float maximum). ``U`` is measured from the largest utility, so
nothing overflows; masses from 1e-300 to 1e300 are just log-masses from -690
to 690. Inside the interval, the distance ``f * w`` from the end of larger
utility solves :math:`(1 - e^{-y f}) = v (1 - e^{-y})` for a uniform ``v``:
``f = -log1p(v * expm1(-y)) / y`` (``f = v`` once ``y`` is below the float
epsilon), stable for both signs of the slope.

The grid path. For a utility that is not piecewise linear, evaluate it on a
data-independent grid and call :func:`jaxdp.exponential` (or
:func:`jaxdp.exponential_streaming` for grids too large to hold)::

    grid = jnp.linspace(lo, hi, num_points)            # fixed before seeing data
    i = jaxdp.exponential(key, jax.vmap(utility)(grid), epsilon=eps, sensitivity=delta)
    r = grid[i]

That is ε-DP exactly as :func:`jaxdp.exponential` (the grid must not depend on
the data). What it loses is a resolution term. If ``u`` is L-Lipschitz on
``[lo, hi]`` and every point of ``[lo, hi]`` is within ``h/2`` of a grid point
(spacing ``h``; ``N`` points), then :math:`\mathrm{OPT}_{grid} \ge
\mathrm{OPT} - L h / 2`, and the finite-range bound (Dwork & Roth, Thm 3.11)
becomes

.. math::

    \Pr\Big[u(r) \le \mathrm{OPT} - \frac{L h}{2}
        - \frac{2\Delta}{\varepsilon}(\ln N + t)\Big] \le e^{-t}.

The exact continuous mechanism satisfies, for every ``s > 0`` with
``s / L <= hi - lo``, :math:`\Pr[u(r) \le \mathrm{OPT} - s - \frac{2\Delta}{\varepsilon}
(\ln\frac{L (hi - lo)}{s} + t)] \le e^{-t}` (the set within ``s`` of OPT has
length at least ``s / L``). With ``N = (hi - lo)/h`` the two match up to the
``L h / 2`` term, so a grid is enough when ``L h / 2`` is small against
``2Δ/ε``, i.e. ``h <= Δ / (ε L)`` keeps the extra loss below ``Δ / (2ε)``; a
finer grid only adds ``(2Δ/ε) ln`` of its size. A utility that is only
one-sided Lipschitz at the optimum (pricing: revenue falls to the left of a
bid by at most ``n`` per unit, but jumps down to its right) needs a grid point
*below* the optimum: the term is ``L h`` with ``L = n``. For step utilities
(quantiles) no grid is needed at all: use :func:`private_quantile`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _inverse_cdf, _logits, _random, _rows
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

# ----------------------------------------------------------------------------- core


def _log_shape(y: Array) -> Array:
    r""":math:`\log((1 - e^{-y}) / y)` for ``y >= 0``: the log-mass of a unit-width
    interval whose log-density falls by ``y`` from one end to the other."""
    small = y < 1e-3
    safe = jnp.where(small, jnp.ones_like(y), y)
    large = jnp.log(-jnp.expm1(-safe)) - jnp.log(safe)
    series = y * (-0.5 + y / 24)
    return jnp.where(small, series, large)


def _fraction(v: Array, y: Array) -> Array:
    """Inverse CDF on [0, 1] of the density ∝ exp(-y f): f = -log1p(v expm1(-y)) / y."""
    tiny = y < jnp.finfo(y.dtype).eps
    safe = jnp.where(tiny, jnp.ones_like(y), y)
    f = -jnp.log1p(v * jnp.expm1(-safe)) / safe
    return jnp.clip(jnp.where(tiny, v, f), 0, 1)


def _sample_rows(
    key: PRNGKey, edges: Array, upper: Array, drop: Array, right: Array, num_lead: int
) -> tuple[Array, Array]:
    """Exact draws from a piecewise log-linear density, row by row.

    ``edges`` ``(R, m+1)`` non-decreasing; per interval ``(R, m)``: ``upper`` the
    log-density at its larger end (``-inf``: never drawn), ``drop >= 0`` its fall
    across the interval, ``right`` whether the larger end is the right one.
    Returns draws ``(num_lead, R)`` and a per-row flag that some mass is positive.
    """
    num_rows = edges.shape[0]
    a = edges[:, :-1]
    b = edges[:, 1:]
    width = b - a
    log_mass = upper + jnp.log(jnp.maximum(width, 0)) + _log_shape(drop)
    log_mass = jnp.where(jnp.isnan(log_mass), -jnp.inf, log_mass)
    logits, has_mass = _logits.shift_log_weights(log_mass)
    key_interval, key_point = jax.random.split(key)
    j, _ = _inverse_cdf.from_logits(key_interval, logits, (num_lead, num_rows))
    j = jnp.clip(j, 0, a.shape[-1] - 1).T  # (R, num_lead)

    def pick(x: Array) -> Array:
        return jnp.take_along_axis(x, j, axis=1).T

    aj, bj, wj, yj, rj = pick(a), pick(b), pick(width), pick(drop), pick(right)
    v = _random.uniform(key_point, (num_lead, num_rows), edges.dtype)
    dist = _fraction(v, yj) * wj
    r = jnp.where(rj, bj - dist, aj + dist)
    return jnp.clip(r, aj, bj), has_mass


def _drop(scale: Array, slope_abs: Array, width: Array) -> Array:
    big = jnp.finfo(width.dtype).max
    y = jnp.minimum(scale[:, None] * (slope_abs * width), big)
    return jnp.where(width > 0, y, jnp.zeros_like(y))


def _fmt(value: Any) -> str:
    return _checks._fmt(value)


def _pair(value: Any, fn: str, name: str) -> Array:
    """A ``(lo, hi)`` pair: concrete ones must be finite with lo < hi."""
    if value is None or isinstance(value, (str, bytes)):
        raise ValueError(f"{fn}: {name} must be a pair (lo, hi), got {value!r}")
    try:
        arr = jnp.asarray(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: {name} must be a pair (lo, hi), got {value!r}") from err
    if arr.shape != (2,) or not (
        jnp.issubdtype(arr.dtype, jnp.integer) or jnp.issubdtype(arr.dtype, jnp.floating)
    ):
        raise ValueError(f"{fn}: {name} must be a pair of real numbers (lo, hi), got {value!r}")
    arr = arr.astype(_checks.compute_dtype())
    if _checks.is_concrete(arr):
        lo, hi = (float(x) for x in np.asarray(arr, np.float64))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"{fn}: {name} must be finite, got {_fmt(arr)}")
        if not lo < hi:
            raise ValueError(f"{fn}: {name} must have lo < hi, got lo={lo!r}, hi={hi!r}")
        _span_fits(fn, name, arr[0], arr[1])
    return arr


def _span_fits(fn: str, name: str, lo: Any, hi: Any) -> None:
    """Raises when ``hi - lo`` overflows the compute dtype (interval widths would be inf)."""
    dtype = _checks.compute_dtype()
    with np.errstate(over="ignore"):
        span = np.asarray(hi, dtype) - np.asarray(lo, dtype)
    if not np.all(np.isfinite(span)):
        raise ValueError(
            f"{fn}: {name} spans {_fmt(lo)} to {_fmt(hi)}, whose width overflows "
            f"{np.dtype(dtype).name}; use a narrower interval (or jax.enable_x64())"
        )


def _data_array(x: ArrayLike, fn: str, name: str) -> Array:
    """Data ``[..., n]``; ``n = 0`` (an empty dataset) is valid data, never an error."""
    arr = _checks.float_array(x, fn, name, allow_neg_inf=False)
    if arr.ndim == 0:
        raise ValueError(f"{fn}: {name} must be an array [..., n], got a scalar {_fmt(arr)}")
    return arr


def _batch(fn: str, what: str, **shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return _rows.broadcast_batch(*shapes.values())
    except ValueError as err:
        desc = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(f"{fn}: the batch shapes of {what} must broadcast: {desc}") from err


# ----------------------------------------------------------------------------- piecewise


def exponential_piecewise(
    key: PRNGKey,
    edges: ArrayLike,
    intercepts: ArrayLike,
    slopes: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""Samples the exponential mechanism exactly for a piecewise-linear utility.

    .. math::

        p(r) \propto \exp\Big(\frac{\varepsilon\, u(r)}{2\Delta}\Big),\quad
        u(r) = c_j + m_j r \ \text{ on } [e_j, e_{j+1}),\quad r \in [e_0, e_m]

    (:math:`\varepsilon u / \Delta` when ``monotonic``), with edges :math:`e`,
    intercepts :math:`c` and slopes :math:`m`. No grid: each interval's mass
    :math:`\int e^{k u}` is computed in closed form in log space, an interval is
    drawn by the inverse CDF of the masses, then the point by the exact inverse
    CDF of the truncated exponential inside it. Stable for slopes near 0 (and
    0), zero-width intervals, huge ε, and masses from 1e-300 to 1e300; see the
    module notes, which also document the grid path for other utilities.

    **Privacy.** If u(r) changes by at most Δ for every r between neighbouring
    datasets (add or remove one record), each draw is ε-DP (McSherry & Talwar
    2007, Thm 6, whose proof holds for any base measure, here Lebesgue on
    ``[e_0, e_m]``); with ``monotonic=True`` (u moves in one direction for all r)
    the factor ε/Δ keeps ε-DP. The edges are the range of the mechanism: they
    must not depend on the data except through a utility of sensitivity Δ.

    **Finite precision.** The interval is drawn by the categorical kernel
    (``SECURITY.md``, "The categorical kernel"), adding its (ε_c', δ_c'). The
    m log-masses ``U_j + log w_j + ψ(y_j) - top`` are computed in float32 with
    unit roundoff ``u = 2**-24``: intervals whose log-mass is below ``-50`` (of
    total mass at most ``m e^-50``) go to δ', and every other one carries a
    relative error of at most ``4 u Λ``, Λ ≤ 50 + max |log w_j / w_top| + |ψ|
    the size of its terms, so each outcome's probability is off by at most a
    factor ``e^(8 u Λ)`` on each of two neighbours. The in-interval inverse CDF
    ``f = -log1p(v expm1(-y)) / y`` of an open 32-bit uniform is within a
    factor ``e^(2u)`` of its exact density on the float grid of the interval
    (rounding to that grid is a post-processing). So each draw is (ε', δ')-DP
    with ε' ≤ ε + ε_c' + 16uΛ + 4u and δ' ≤ δ_c' + m e^-50 (float32: for
    Λ ≤ 10, 16uΛ ≤ 1e-5; for widths spanning 1e±20, Λ ≈ 140 and 16uΛ ≈ 1.3e-4,
    over the 1e-5 target: use ``jax.enable_x64()``, where u = 2**-53).

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      edges: ``[..., m+1]`` real, finite and non-decreasing along the last axis,
        with ``edges[..., -1] > edges[..., 0]``. Zero-width intervals are allowed
        (they have mass 0). Traced or concrete.
      intercepts: ``[..., m]`` real; ``-inf`` marks an interval never drawn.
      slopes: ``[..., m]`` real and finite. Leading dims of the three arrays, ε
        and Δ broadcast to the batch shape.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be
        traced (``vmap`` over an ε grid compiles once).
      sensitivity: Δ > 0, same rules.
      monotonic: static bool (``True``/``False`` or a NumPy bool; strings and
        ints raise); see **Privacy**.
      shape: static draw shape as in :func:`jax.random.categorical`: it ends with
        dims the batch shape broadcasts to; leading dims are i.i.d. draws.

    Returns:
      Float array (float32, float64 under x64) of ``shape`` with values in
      ``[edges[0], edges[-1]]``. Under tracing, rows with invalid input (unsorted
      or non-finite edges, NaN or +inf intercepts, non-finite slopes, no interval
      of positive mass, or ε, Δ not finite and > 0) give NaN; ``checkify``
      reports why.

    Raises:
      ValueError: for fewer than 2 edges; mismatched lengths of edges (m+1),
        intercepts (m) and slopes (m); non-finite or unsorted edges, or
        ``edges[-1] <= edges[0]``; NaN or +inf intercepts; non-finite slopes; no
        interval of positive width with a finite intercept; edges whose span
        ``edges[-1] - edges[0]`` overflows the compute dtype, or a utility that
        overflows at an edge (e.g. edges (-3e38, 3e38) in float32); a concrete ε
        or Δ not finite and > 0 in the compute dtype; ``monotonic`` not a bool; a
        bad ``shape``; a batched key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> r = jaxdp.exponential_piecewise(
      ...     jax.random.key(0), jnp.array([0.0, 1.0, 3.0]), jnp.array([0.0, 2.0]),
      ...     jnp.array([1.0, -1.0]), epsilon=1.0, sensitivity=1.0, shape=(10**5,))
      >>> r.shape, r.dtype, bool(((r >= 0) & (r <= 3)).all())
      ((100000,), dtype('float32'), True)

    .. note::
      In float32 an interval whose mass is below ~2**-23 of the total is
      mis-weighted (the interval uniform has 23 bits) and the point inside an
      interval has float32 resolution; under ``jax.enable_x64()`` both drop to
      about 1e-16.

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.4.
    """
    fn = "exponential_piecewise"
    key = _checks.single_key(key, fn)
    monotonic = _checks.boolean(monotonic, fn, "monotonic")
    _checks.positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    edges = _checks.float_array(edges, fn, "edges", allow_neg_inf=False)
    intercepts = _checks.float_array(intercepts, fn, "intercepts")
    slopes = _checks.float_array(slopes, fn, "slopes", allow_neg_inf=False)
    for name, arr in (("edges", edges), ("intercepts", intercepts), ("slopes", slopes)):
        if arr.ndim == 0:
            raise ValueError(f"{fn}: {name} must be an array [..., m(+1)], got a scalar")
    m = edges.shape[-1] - 1
    if m < 1:
        raise ValueError(f"{fn}: edges needs at least 2 entries, got shape {edges.shape}")
    if intercepts.shape[-1] != m or slopes.shape[-1] != m:
        raise ValueError(
            f"{fn}: edges has {m + 1} entries along its last axis, so intercepts and slopes "
            f"need {m}; got intercepts shape {intercepts.shape} and slopes shape "
            f"{slopes.shape}"
        )
    if _checks.is_concrete(edges):
        e = np.asarray(edges)
        with np.errstate(over="ignore"):
            steps = np.diff(e, axis=-1)
        if np.any(steps < 0):
            pos = tuple(int(i) for i in np.argwhere(steps < 0)[0])
            nxt = pos[:-1] + (pos[-1] + 1,)
            raise ValueError(
                f"{fn}: edges must be sorted (non-decreasing); edges{list(nxt)}={e[nxt]!r} < "
                f"edges{list(pos)}={e[pos]!r}"
            )
        if np.any(e[..., -1] <= e[..., 0]):
            raise ValueError(
                f"{fn}: edges must span an interval of positive length, got edges[0]="
                f"{_fmt(e[..., 0])} and edges[-1]={_fmt(e[..., -1])}"
            )
        _span_fits(fn, "edges", e[..., 0], e[..., -1])
        if _checks.is_concrete(intercepts) and _checks.is_concrete(slopes):
            with np.errstate(over="ignore", invalid="ignore"):
                c, m = np.asarray(intercepts), np.asarray(slopes)
                ends = np.stack([c + m * e[..., :-1], c + m * e[..., 1:]])
            if np.any(np.isnan(ends) | (ends == np.inf)):
                raise ValueError(
                    f"{fn}: the utility intercepts + slopes * edges overflows (or is NaN) at "
                    f"an edge of {np.dtype(ends.dtype).name}; rescale the utility or the edges"
                )
        if _checks.is_concrete(intercepts):
            usable = (steps > 0) & (np.asarray(intercepts) > -np.inf)
            if np.any(~np.any(usable, axis=-1)):
                raise ValueError(
                    f"{fn}: every row needs an interval of positive width with a finite "
                    "intercept; all have width 0 or intercept -inf"
                )
    dtype = _checks.compute_dtype()
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    batch = _batch(
        fn,
        "edges, intercepts, slopes, epsilon and sensitivity",
        edges=edges.shape[:-1],
        intercepts=intercepts.shape[:-1],
        slopes=slopes.shape[:-1],
        epsilon=epsilon.shape,
        sensitivity=sensitivity.shape,
    )
    shape = _checks.draw_shape(shape, batch, fn)
    return _piecewise_impl(
        key, edges, intercepts, slopes, epsilon, sensitivity, monotonic=monotonic, shape=shape
    )


@partial(jax.jit, static_argnames=("monotonic", "shape"))
def _piecewise_impl(key, edges, intercepts, slopes, epsilon, sensitivity, *, monotonic, shape):
    fn = "exponential_piecewise"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    batch = _rows.broadcast_batch(
        edges.shape[:-1],
        intercepts.shape[:-1],
        slopes.shape[:-1],
        epsilon.shape,
        sensitivity.shape,
    )
    num_lead, tail = _rows.split_shape(shape, batch)
    e = _rows.flatten_rows(edges, tail)
    c = _rows.flatten_rows(intercepts, tail)
    m = _rows.flatten_rows(slopes, tail)
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, edges.dtype)
    scale = _logits.clip_scale(_rows.flatten_batch(scale, tail))
    a, b = e[:, :-1], e[:, 1:]
    u_a = c + m * a
    u_b = c + m * b
    u_top = jnp.maximum(u_a, u_b)
    width = b - a
    best = jnp.max(jnp.where(width > 0, u_top, -jnp.inf), axis=-1)
    upper = _logits.Logits(u_top, best, scale).values()
    drop = _drop(scale, jnp.abs(m), width)
    draws, has_mass = _sample_rows(key, e, upper, drop, m > 0, num_lead)

    edges_ok = jnp.all(jnp.isfinite(e), axis=-1) & jnp.all(width >= 0, axis=-1)
    edges_ok = edges_ok & (e[:, -1] > e[:, 0]) & jnp.isfinite(e[:, -1] - e[:, 0])
    lines_ok = ~jnp.any(jnp.isnan(c) | (c == jnp.inf), axis=-1) & jnp.all(jnp.isfinite(m), -1)
    lines_ok = lines_ok & ~jnp.any(jnp.isnan(u_top) | (u_top == jnp.inf), axis=-1)
    debug_check(
        jnp.all(edges_ok),
        f"{fn}: edges must be finite and non-decreasing, with a width that does not overflow",
    )
    debug_check(
        jnp.all(lines_ok), f"{fn}: intercepts must not be NaN or +inf; slopes must be finite"
    )
    debug_check(jnp.all(has_mass), f"{fn}: every row needs an interval of positive mass")
    valid = (
        edges_ok
        & lines_ok
        & has_mass
        & _rows.flatten_batch(_logits.params_valid(batch, epsilon, sensitivity), tail)
    )
    return jnp.where(valid[None, :], draws, jnp.nan).reshape(shape)


# ----------------------------------------------------------------------------- pricing


def private_price(
    key: PRNGKey,
    bids: ArrayLike,
    *,
    epsilon: ArrayLike,
    bounds: tuple[float, float] | ArrayLike | None = None,
    shape: Sequence[int] | None = None,
    price_range: tuple[float, float] | ArrayLike | None = None,
) -> Array:
    r"""Posts a private price for a digital-goods auction, sampled exactly.

    .. math::

        p(\text{price}) \propto \exp\Big(\frac{\varepsilon\, \mathrm{rev}(\text{price})}
        {2\,\bar p}\Big),\quad
        \mathrm{rev}(\text{price}) = \text{price}\cdot\#\{i: b_i \ge \text{price}\},
        \quad \text{price} \in [\underline p, \bar p]

    with ``bounds`` = :math:`(\underline p, \bar p)`. Revenue is linear
    between consecutive sorted bids (the count is constant there), so this is
    :func:`exponential_piecewise` on the edges ``[lo, sorted bids, hi]`` with
    slope = count: exact, with no grid. Cost: one sort, O(n log n), then O(log n)
    per draw.

    **Bids outside the bounds are data, not errors.** Every bid ``b >= 0`` is in
    the data domain, and none raises (an error that depends on one bid would be
    an output its neighbour never produces). Bids are clipped to ``bounds``,
    which leaves the revenue on ``[lo, hi]`` unchanged: a bid above ``hi`` is
    ``>= p`` for every posted price, exactly as a bid at ``hi``; a bid below
    ``lo`` counts for no price above ``lo``, exactly as a bid at ``lo`` (they
    differ only at the single price ``lo``, a set of measure 0). An empty
    auction (n = 0) has revenue 0 everywhere: the price is uniform on ``bounds``.

    **Privacy.** Adding or removing one bidder changes the revenue at price p by
    at most p ≤ :math:`\bar p`, so Δ = ``bounds[1]`` and each draw is ε-DP
    (McSherry & Talwar 2007, §4 and Thm 6). ``bounds`` must be public (fixed
    before seeing the bids).

    **Finite precision.** As :func:`exponential_piecewise`: the interval is drawn
    by the categorical kernel (``SECURITY.md``, "The categorical kernel"), adding
    its (ε_c', δ_c'); the float32 log-masses (n + 1 intervals) add
    ``16 u Λ`` to ε' and ``(n + 1) e^-50`` to δ', and the in-interval inverse CDF
    ``2 u`` more per interval plus its rounding to the float grid (a
    post-processing), with ``u = 2**-24`` and Λ ≤ 50 + |log(width ratios)| the
    size of the log-mass terms (derivation in ``SECURITY.md``, "Continuous
    mechanisms"). So ε' ≤ ε + ε_c' + 16uΛ + 4u and δ' ≤ δ_c' + (n + 1)e^-50.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      bids: ``[..., n]`` real, finite bids (``n >= 0``); values outside ``bounds``
        are clipped to them. Leading dims are a batch of auctions. Traced or
        concrete.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be
        traced.
      bounds: the public pair ``(lo, hi)`` of prices, finite, ``0 <= lo < hi``.
      shape: static draw shape as in :func:`jax.random.categorical`.
      price_range: deprecated name of ``bounds`` (a ``DeprecationWarning``).

    Returns:
      Float prices (float32, float64 under x64) of ``shape`` in ``[lo, hi]``.
      Under tracing, invalid rows (NaN or infinite bids, a bad range, ε not
      finite and > 0) give NaN; ``checkify`` reports why.

    Raises:
      ValueError: for NaN or infinite bids; ``bounds`` missing, given twice (as
        ``bounds`` and ``price_range``), or not a finite pair with
        ``0 <= lo < hi``; a concrete ε not finite and > 0; a bad ``shape``; a
        batched key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> bids = jnp.array([1.0, 1.0, 1.0, 3.01])
      >>> p = jaxdp.private_price(jax.random.key(0), bids, epsilon=1.0,
      ...                         bounds=(0.0, 3.5), shape=(10**5,))
      >>> p.shape, p.dtype, bool(((p >= 0) & (p <= 3.5)).all())
      ((100000,), dtype('float32'), True)

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "private_price"
    key = _checks.single_key(key, fn)
    if price_range is not None:
        if bounds is not None:
            raise ValueError(
                f"{fn}: pass the price interval once, as bounds=; got both bounds={bounds!r} "
                f"and the deprecated price_range={price_range!r}"
            )
        warnings.warn(
            f"{fn}: price_range= is deprecated; use bounds= (the same pair (lo, hi))",
            DeprecationWarning,
            stacklevel=2,
        )
        bounds = price_range
    if bounds is None:
        raise ValueError(f"{fn}: bounds (lo, hi), the public price interval, is required")
    _checks.positive(fn, epsilon=epsilon)
    bounds = _pair(bounds, fn, "bounds")
    bids = _data_array(bids, fn, "bids")
    if _checks.is_concrete(bounds):
        lo = float(np.asarray(bounds, np.float64)[0])
        if lo < 0:
            raise ValueError(f"{fn}: bounds must have lo >= 0, got lo={lo!r}")
    dtype = _checks.compute_dtype()
    epsilon = jnp.asarray(epsilon, dtype)
    batch = _batch(fn, "bids and epsilon", bids=bids.shape[:-1], epsilon=epsilon.shape)
    shape = _checks.draw_shape(shape, batch, fn)
    return _price_impl(key, bids, bounds, epsilon, shape=shape)


@partial(jax.jit, static_argnames=("shape",))
def _price_impl(key, bids, bounds, epsilon, *, shape):
    fn = "private_price"
    _checks.debug_check_positive(fn, epsilon=epsilon)
    lo, hi = bounds[0], bounds[1]
    range_ok = jnp.isfinite(lo) & jnp.isfinite(hi) & (lo >= 0) & (lo < hi)
    range_ok = range_ok & jnp.isfinite(hi - lo)
    bids_ok = jnp.all(jnp.isfinite(bids), axis=-1)
    debug_check(range_ok, f"{fn}: bounds must be finite with 0 <= lo < hi")
    debug_check(jnp.all(bids_ok), f"{fn}: bids must be finite")
    n = bids.shape[-1]
    batch = _rows.broadcast_batch(bids.shape[:-1], epsilon.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    rows = math.prod(tail)
    # Clipping keeps the revenue on [lo, hi]: see the docstring.
    ordered = jnp.sort(jnp.clip(bids, lo, hi), axis=-1)
    ordered = _rows.flatten_rows(ordered, tail)
    ends = jnp.broadcast_to(lo, (rows, 1)), jnp.broadcast_to(hi, (rows, 1))
    e = jnp.concatenate([ends[0], ordered, ends[1]], axis=-1)
    count = (n - jnp.arange(n + 1)).astype(e.dtype)[None, :]  # #{bids >= p} on [e_j, e_j+1)
    # Δ = hi: one bidder moves the revenue at price p by at most p <= hi.
    scale = _logits.scale_factor(epsilon, hi, False, e.dtype)
    scale = _logits.clip_scale(_rows.flatten_batch(scale, tail))
    revenue_top = count * e[:, 1:]  # revenue grows with p inside each interval
    upper = _logits.Logits(revenue_top, jnp.max(revenue_top, axis=-1), scale).values()
    drop = _drop(scale, count, e[:, 1:] - e[:, :-1])
    right = jnp.broadcast_to(count > 0, upper.shape)
    draws, has_mass = _sample_rows(key, e, upper, drop, right, num_lead)
    valid = range_ok & has_mass & _rows.flatten_batch(bids_ok, tail)
    valid = valid & _rows.flatten_batch(_logits.params_valid(batch, epsilon), tail)
    return jnp.where(valid[None, :], draws, jnp.nan).reshape(shape)


# ----------------------------------------------------------------------------- quantiles


def private_quantile(
    key: PRNGKey,
    data: ArrayLike,
    q: ArrayLike,
    *,
    epsilon: ArrayLike,
    bounds: tuple[float, float] | ArrayLike,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""Releases a private q-quantile with Smith's exponential mechanism, exactly.

    With the data clipped to ``bounds`` = :math:`[a, b]` and sorted,
    :math:`x_{(0)} = a \le x_{(1)} \le \dots \le x_{(n)} \le x_{(n+1)} = b`,

    .. math::

        p(r) \propto \exp\Big(-\frac{\varepsilon}{2\max(q, 1-q)}\,
            \big|\#\{i: x_i < r\} - q n\big|\Big),\quad r \in [a, b],

    which is constant on each :math:`[x_{(j)}, x_{(j+1)})` (count = j). So an
    interval is drawn with probability ∝ its length × exp(-ε|j - qn| / (2
    max(q, 1-q))) and the release is uniform inside it (Smith 2011). Exact, no
    grid: one sort, O(n log n), then O(log n) per draw. Ties give zero-length
    intervals (mass 0, kept in log space as -inf), so 1e6 integer-valued points
    are fine. Empty data (n = 0) has utility 0 everywhere: the release is uniform
    on ``bounds``, as in dp_multiq and OpenDP (an empty dataset is data, and its
    neighbours are the one-record datasets: it must not raise).

    **Privacy.** The sensitivity is max(q, 1 - q), not 1. Add one record x to a
    dataset of n records: for r > x the count ``#{x_i < r}`` grows by 1 and qn
    by q, so ``count - qn`` moves by 1 - q; for r <= x the count is unchanged and
    ``count - qn`` moves by -q. By the reverse triangle inequality the utility
    ``-|count - qn|`` moves by at most max(q, 1 - q) at every r, and removing a
    record is the same change reversed. So the exponential mechanism with the
    factor ε / (2 max(q, 1 - q)) is ε-DP (McSherry & Talwar 2007, Thm 6, with
    Lebesgue base measure on ``[a, b]``; Smith 2011; OpenDP uses the same
    bound). The utility is not monotonic (it moves up for some r and down for
    others), so the factor 2 stays. At q = 1/2 this is ε·|count - n/2|, twice
    as sharp as the Δ = 1 form. Clipping is a per-record map with public bounds,
    so it costs no privacy. ``bounds`` must be public.

    **Finite precision.** As :func:`exponential_piecewise`: the interval is drawn
    by the categorical kernel (``SECURITY.md``, "The categorical kernel"), adding
    its (ε_c', δ_c'); the float32 log-masses (n + 1 intervals) add ``16 u Λ`` to
    ε' and ``(n + 1) e^-50`` to δ' (``u = 2**-24``, Λ ≤ 50 + |log(width ratios)|);
    the point inside an interval is uniform (a float32 affine map of an open
    uniform, a post-processing of the interval up to its rounding to the float
    grid). So ε' ≤ ε + ε_c' + 16uΛ and δ' ≤ δ_c' + (n + 1)e^-50 (derivation in
    ``SECURITY.md``, "Continuous mechanisms").

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      data: ``[..., n]`` real and finite, ``n >= 0``. Values outside ``bounds`` are
        **clipped** to them (as in Smith 2011), not rejected. Leading dims are a
        batch of datasets. Traced or concrete.
      q: the quantile in ``[0, 1]``; number or array broadcasting with the batch
        shape; may be traced.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be
        traced.
      bounds: the public pair ``(lo, hi)``, finite, ``lo < hi``.
      shape: static draw shape as in :func:`jax.random.categorical`.

    Returns:
      Float array (float32, float64 under x64) of ``shape`` in ``[lo, hi]``. Under
      tracing, invalid rows (NaN or infinite data, q outside [0, 1], a bad
      ``bounds``, ε not finite and > 0) give NaN; ``checkify`` reports why.

    Raises:
      ValueError: for NaN or infinite data; q outside [0, 1] or not finite;
        ``bounds`` not a finite pair with ``lo < hi`` (or whose width overflows);
        a concrete ε not finite and > 0; a bad ``shape``; a batched key. Never
        for data values inside the domain (any finite value, any n >= 0).

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> data = jnp.arange(1000.0)
      >>> med = jaxdp.private_quantile(jax.random.key(0), data, 0.5, epsilon=1.0,
      ...                              bounds=(0.0, 1000.0), shape=(10**4,))
      >>> med.shape, med.dtype
      ((10000,), dtype('float32'))

    References:
      A. Smith, `Privacy-preserving Statistical Estimation with Optimal Convergence
      Rates <https://doi.org/10.1145/1993636.1993743>`_, STOC 2011.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "private_quantile"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, epsilon=epsilon)
    bounds = _pair(bounds, fn, "bounds")
    data = _data_array(data, fn, "data")
    q = _checks.float_array(q, fn, "q", allow_neg_inf=False)
    if _checks.is_concrete(q) and q.size:
        qs = np.asarray(q, np.float64)
        if np.any((qs < 0) | (qs > 1)):
            raise ValueError(f"{fn}: q must be in [0, 1], got {_fmt(q)}")
    dtype = _checks.compute_dtype()
    epsilon = jnp.asarray(epsilon, dtype)
    batch = _batch(
        fn, "data, q and epsilon", data=data.shape[:-1], q=q.shape, epsilon=epsilon.shape
    )
    shape = _checks.draw_shape(shape, batch, fn)
    return _quantile_impl(key, data, q, bounds, epsilon, shape=shape)


@partial(jax.jit, static_argnames=("shape",))
def _quantile_impl(key, data, q, bounds, epsilon, *, shape):
    fn = "private_quantile"
    _checks.debug_check_positive(fn, epsilon=epsilon)
    lo, hi = bounds[0], bounds[1]
    bounds_ok = jnp.isfinite(lo) & jnp.isfinite(hi) & (lo < hi) & jnp.isfinite(hi - lo)
    data_ok = jnp.all(jnp.isfinite(data), axis=-1)
    q_ok = jnp.isfinite(q) & (q >= 0) & (q <= 1)
    debug_check(bounds_ok, f"{fn}: bounds must be finite with lo < hi")
    debug_check(jnp.all(data_ok), f"{fn}: data must be finite")
    debug_check(jnp.all(q_ok), f"{fn}: q must be in [0, 1], got {{}}", q)
    n = data.shape[-1]
    batch = _rows.broadcast_batch(data.shape[:-1], q.shape, epsilon.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    rows = math.prod(tail)
    ordered = _rows.flatten_rows(jnp.sort(jnp.clip(data, lo, hi), axis=-1), tail)
    ends = jnp.broadcast_to(lo, (rows, 1)), jnp.broadcast_to(hi, (rows, 1))
    e = jnp.concatenate([ends[0], ordered, ends[1]], axis=-1)
    target = _rows.flatten_batch(q * n, tail)
    utility = -jnp.abs(jnp.arange(n + 1, dtype=e.dtype)[None, :] - target[:, None])
    # Sensitivity max(q, 1 - q) (docstring); >= 1/2, so no division by 0.
    scale = _logits.scale_factor(epsilon, jnp.maximum(q, 1 - q), False, e.dtype)
    scale = _logits.clip_scale(_rows.flatten_batch(scale, tail))
    upper = _logits.Logits(utility, jnp.max(utility, axis=-1), scale).values()
    zeros = jnp.zeros_like(upper)
    draws, has_mass = _sample_rows(key, e, upper, zeros, zeros > 0, num_lead)
    valid = bounds_ok & has_mass & _rows.flatten_batch(data_ok, tail)
    valid = valid & _rows.flatten_batch(q_ok & _logits.params_valid(batch, epsilon), tail)
    return jnp.where(valid[None, :], draws, jnp.nan).reshape(shape)
