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

from . import _alias, _cell, _checks, _descent, _inverse_cdf, _logits, _rows
from . import _twofloat as _tf
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

# ----------------------------------------------------------------------------- core


#: ``ln 2`` split so that ``e * _LN2_HI`` is exact for every binary exponent ``e``
#: (15 significant bits, ``|e| < 2**11``), and its remainder.
_LN2_HI = 0.693145751953125
_LN2_LO = math.log(2) - _LN2_HI

#: Assumed relative error of the backend's ``expm1``, in units of ``u`` (4 ulp;
#: ``tests/test_continuous_precision.py`` measures it on the running backend:
#: 5.9u on XLA:CPU over the arguments used). ``log`` is assumed within 4u, as by
#: the noise paths (``tests/test_precision_noise.py``).
EXPM1_ERROR_U = 8.0
LOG_ERROR_U = 4.0


def _dd(h: Array, lo: Array) -> tuple[Array, Array]:
    """``h + lo`` renormalised into a double-float, or ``(h, 0)`` where ``h`` is not
    finite (the error terms of infinite operands are NaN; they must not reach ``h``)."""
    finite = jnp.isfinite(h)
    s, e = _tf.fast_two_sum(h, jnp.where(finite, lo, jnp.zeros_like(lo)))
    return s, jnp.where(finite, e, jnp.zeros_like(e))


def _log_dd(x: Array) -> tuple[Array, Array]:
    """``log x`` as a double-float within ``1.4u`` *absolute* of the exact one, at
    any magnitude, for ``x >= 0`` (``log 0 = -inf``).

    ``x = m 2**e`` with ``m`` in ``[1/sqrt 2, sqrt 2)``: ``e ln 2`` is exact as
    ``e _LN2_HI + e _LN2_LO`` (up to ``~|e| u**2``), and ``log m`` is at most 0.35
    in size, so the backend's relative error of ``log`` (4u at most, pinned per
    backend by ``tests/test_precision_noise.py``) is at most 1.4u absolute.
    ``jnp.log(x)`` instead has an error relative to its *result*: ``2u |log x|``,
    100u at 1e-20. In float32 ``m`` and ``e`` come from the bits (``frexp`` is
    several times slower on XLA:CPU); subnormals are scaled by ``2**24`` first.
    """
    if x.dtype == jnp.float32:
        sub = (x > 0) & (x < np.finfo(np.float32).tiny)
        y = jnp.where(sub, x * np.float32(2.0**24), x)
        bits = jax.lax.bitcast_convert_type(y, jnp.uint32)
        e = (bits >> np.uint32(23)).astype(jnp.int32) - jnp.where(sub, 127 + 24, 127)
        m = jax.lax.bitcast_convert_type(
            (bits & np.uint32(0x007FFFFF)) | np.uint32(0x3F800000), jnp.float32
        )  # [1, 2)
        high = m >= np.sqrt(2.0)
        m = jnp.where(high, m * np.float32(0.5), m)
        e = jnp.where(high, e + 1, e)
    else:
        m, e = jnp.frexp(x)  # [1/2, 1)
        low = m < np.sqrt(0.5)
        m = jnp.where(low, m * 2, m)
        e = jnp.where(low, e - 1, e)
    ef = e.astype(x.dtype)
    hi, lo = _tf.two_sum(ef * x.dtype.type(_LN2_HI), jnp.log(m))
    hi, lo = _tf.fast_two_sum(hi, lo + ef * x.dtype.type(_LN2_LO))
    # log 0 = -inf, log inf = inf, NaN elsewhere off (0, inf): no second log computed.
    live = (x > 0) & jnp.isfinite(x)
    edge = jnp.where(x == 0, -jnp.inf, jnp.where(x == jnp.inf, jnp.inf, jnp.nan))
    return jnp.where(live, hi, edge.astype(x.dtype)), jnp.where(live, lo, jnp.zeros_like(lo))


def _log_shape(y: Array) -> tuple[Array, Array]:
    r""":math:`\psi(y) = \log((1 - e^{-y}) / y)` for ``y >= 0``, as a double-float:
    the log-mass of a unit-width interval whose log-density falls by ``y`` from one
    end to the other. Computed as the log of the ratio ``r = -expm1(-y) / y`` in
    ``(0, 1]`` (for ``y > 2**64``, where ``-expm1(-y)`` is 1, as ``1 / (y 2**-64)``
    less ``64 ln 2``, so that ``r`` stays normal): within ``(8 + 1 + 1.4) u``
    absolute of ``psi`` at the given ``y`` (``expm1``'s 8u, :data:`EXPM1_ERROR_U`,
    the division and :func:`_log_dd`) at any ``y``; the series ``-y/2 + y**2/24``
    below ``y = 1e-3`` is within ``u y`` of it."""
    small = y < 1e-3
    big = y > 2.0**64
    safe = jnp.where(small, jnp.ones_like(y), y)
    scaled = safe * y.dtype.type(2.0**-64)
    r = jnp.where(big, 1 / scaled, -jnp.expm1(-safe) / safe)
    lh, ll = _log_dd(r)
    shift = y.dtype.type(64)  # 64 ln 2, exact as 64 (_LN2_HI + _LN2_LO)
    ch, cl = _tf.two_sum(lh, jnp.where(big, -shift * y.dtype.type(_LN2_HI), 0))
    cl = cl + (ll + jnp.where(big, -shift * y.dtype.type(_LN2_LO), 0))
    series = y * (-0.5 + y / 24)
    return jnp.where(small, series, ch), jnp.where(small, jnp.zeros_like(cl), cl)


def _scaled_gap(u: tuple[Array, Array], best: Array, scale: Array) -> tuple[Array, Array]:
    """``scale (u - best)`` as a double-float, for double-float utilities ``u``
    ``(R, m)`` and finite row values ``best``, ``scale`` ``(R,)``: within ``~4u**2
    scale (|u| + |best|)``. ``-inf`` utilities give ``-inf``."""
    dh, dl = _tf.two_sum(u[0], -best[:, None])
    dh, dl = _dd(dh, dl + u[1])
    dh, dl, k = _tf.balance(dh, dl, scale[:, None])  # no subnormal partial product
    ph, pl = _tf.two_prod(dh, k)
    return _dd(ph, pl + dl * k)


def _affine(c: Array, m: Array, r: Array) -> tuple[Array, Array]:
    """``c + m r`` as a double-float (exact products and sums, one rounding of the
    error terms: within ``~2u**2 (|c| + |m r|)``). The factors are rescaled first
    (:func:`jaxdp._twofloat.unflush`), so that no partial product is subnormal."""
    ph, pl = _tf.two_prod(*_tf.unflush(m, r))
    pl = jnp.where(jnp.isfinite(ph), pl, jnp.zeros_like(pl))
    sh, sl = _tf.two_sum(c, ph)
    return _dd(sh, sl + pl)


def _int_dd(x: Array, dtype) -> tuple[Array, Array]:
    """Non-negative int32 values (below ``2**31 - 128``) as exact double-floats."""
    hi = x.astype(dtype)
    return hi, (x - hi.astype(x.dtype)).astype(dtype)


def _log_masses(edges: Array, upper: tuple[Array, Array], drop: Array) -> tuple[Array, Array]:
    """Double-float log-masses ``upper + log w + psi(drop)`` of the intervals
    (``SECURITY.md``, "Continuous ranges"): for float32 rows within ``4e-12``
    absolute of the exact log-mass of the interval ``[a_j, b_j]`` between the float
    edges at the given drop (:func:`_log_masses_f64`), for float64 rows (x64)
    within ``18u``, at any magnitude of the widths, drops and utilities (beside
    ``upper``'s own error, :func:`_scaled_gap`). ``-inf`` where the mass is 0 or
    the terms are NaN."""
    a = edges[:, :-1]
    b = edges[:, 1:]
    if edges.dtype == jnp.float32:
        return _log_masses_f64(a, b, upper, drop)
    wh, wl = _tf.two_sum(b, -a)  # the exact width
    positive = wh > 0
    lwh, lwl = _log_dd(jnp.where(positive, wh, jnp.zeros_like(wh)))
    # log(wh + wl) = log wh + log1p(wl / wh), and |wl / wh| <= u: log1p is the identity.
    lwl = lwl + jnp.where(positive, wl / jnp.where(positive, wh, 1), 0)
    sh, sl = _log_shape(drop)
    # Each term computed once, into buffers of its own (see _alias._materialise_floats):
    # the sums below read every operand several times, and XLA:CPU would otherwise
    # recompute the logarithms inside each reader (2.5x the time at 10**6 intervals)
    # and might contract each copy differently.
    lwh, lwl, sh, sl, uh, ul = _alias._materialise_floats(lwh, lwl, sh, sl, *upper)
    hi, lo = _tf.dd_add(uh, ul, lwh, lwl)
    hi, lo = _tf.dd_add(hi, lo, sh, sl)
    plain = uh + lwh + sh  # the float sum: NaN or -inf exactly where the mass is
    dead = jnp.isnan(plain) | (plain == -jnp.inf)
    return jnp.where(dead, -jnp.inf, hi), jnp.where(dead | ~jnp.isfinite(hi), 0, lo)


def _log_masses_f64(
    a: Array, b: Array, upper: tuple[Array, Array], drop: Array
) -> tuple[Array, Array]:
    """:func:`_log_masses` for float32 rows with edges ``a``, ``b``: ``log w`` and
    ``psi(drop)`` computed in float64 (inside ``jax.enable_x64``; O(m) work per row,
    none per draw) and the sum returned as a float32 double-float.

    The width is ``b - a`` in float64 (exact for normal edges up to one rounding of
    ``2**-53``; a float32 difference below float32's normal range would be flushed
    to 0 by XLA:CPU). ``psi(y) = log(-expm1(-y) / y)`` with the division as a
    product by ``lax.reciprocal``, so that checkify's division check, which runs
    after this ``enable_x64`` has closed, meets no float64 division (below
    ``y = 1e-4`` the series ``-y/2 + y**2/24``, within ``4e-20``). Each float64
    term is within ``~1e-13`` absolute of exact at the given width and drop, and
    the pair holds the sum to ``u**2`` of its size (under 512 where the mass
    matters: ``2e-12``), so the log-masses are within ``4u`` (the drop's own
    rounding, ``|y psi'(y)| <= 1``) plus ``4e-12`` and the utilities' ``ν``: the
    float32 terms' ``1.5u + 10.4u`` are gone (``SECURITY.md``, "Continuous
    ranges")."""
    dtype = a.dtype
    # Only the interval choice (an integer) reads them: no gradient enters float64.
    a, b, upper, drop = jax.lax.stop_gradient((a, b, upper, drop))
    with jax.enable_x64(True):
        f64 = jnp.float64
        width = b.astype(f64) - a.astype(f64)
        positive = width > 0
        log_w = jnp.where(positive, jnp.log(jnp.where(positive, width, 1)), -jnp.inf)
        y = drop.astype(f64)
        small = y < 1e-4
        safe = jnp.where(small, jnp.ones_like(y), y)
        psi = jnp.where(
            small, y * (-0.5 + y * (1 / 24)), jnp.log(-jnp.expm1(-safe) * jax.lax.reciprocal(safe))
        )
        total = upper[0].astype(f64) + upper[1].astype(f64) + log_w + psi
        hi = total.astype(dtype)
        finite = jnp.isfinite(total) & jnp.isfinite(hi)
        # the difference on finite stand-ins: -inf - -inf (an empty interval) would
        # form a NaN that checkify's nan_checks reports, though it is masked
        zero = jnp.zeros_like(total)
        lo = (jnp.where(finite, total, zero) - jnp.where(finite, hi, 0).astype(f64)).astype(dtype)
    dead = jnp.isnan(hi) | (hi == -jnp.inf)
    return jnp.where(dead, -jnp.inf, hi), jnp.where(dead | ~jnp.isfinite(hi), 0, lo)


def _quantile_logits(q: Array, n: int, scale: Array) -> tuple[Array, Array]:
    """``scale (u_j - max u)`` for the quantile utility ``u_j = -|j - q n|``, ``j = 0..n``,
    per row ``(R,)`` of ``q`` and ``scale``, as exact double-floats (up to ``~4u**2
    scale n``).

    The target ``q n`` and the utility are carried exactly: ``q n`` rounded to the
    float grid moves between neighbours (``n`` and ``n + 1`` records) by ``q`` plus
    up to ``ulp(q n)``, which the sensitivity ``max(q, 1 - q)`` does not cover: in
    float32 that was ε' up to about 1.05 ε at ``n = 10**6`` and up to 2 ε once
    ``q n >= 2**23`` with ``q`` near 1/2.
    """
    dtype = scale.dtype
    n_h = dtype.type(n)
    n_l = dtype.type(n - int(n_h))
    q = q[:, None]
    t_h, t_l = _tf.dd_add(*_tf.two_prod(q, n_h), *_tf.two_prod(q, n_l))
    j_h, j_l = _int_dd(jnp.arange(n + 1, dtype=jnp.int32), dtype)
    d_h, d_l = _tf.dd_add(j_h[None, :], j_l[None, :], -t_h, -t_l)
    below = d_h < 0
    utility = (jnp.where(below, d_h, -d_h), jnp.where(below, d_l, -d_l))  # -|j - q n|
    return _scaled_gap(utility, jnp.max(utility[0], axis=-1), scale)


def _price_logits(prices: Array, scale: Array) -> tuple[Array, Array]:
    """``scale (R_j - max R)`` for the revenue ``R_j = (n - j) p_j`` at the top price
    ``p_j`` of each interval (``prices`` ``(R, n + 1)``, the sorted bids and ``hi``),
    as exact double-floats (up to ``~4u**2 scale n hi``).

    Rounded to the float grid, ``R_j`` is off by up to ``u (n - j) p_j``, so between
    neighbours it moves by up to ``2u n hi`` more than the sensitivity ``hi``: in
    float32, ε' up to ``ε (1 + 2un)``, 1.12 ε at ``n = 10**6``.
    """
    n = prices.shape[-1] - 1
    # Prices below 2**-60 (the row's largest) times 2**64 and the scale divided by it
    # (exact): their low halves would be subnormal in the revenue's products.
    f = prices.dtype.type
    up = jnp.where(jnp.max(jnp.abs(prices), axis=-1) < f(2.0**-60), f(2.0**64), f(1))
    prices, scale = prices * up[:, None], scale / up
    count_h, count_l = _int_dd(n - jnp.arange(n + 1, dtype=jnp.int32), prices.dtype)
    rh, rl = _tf.two_prod(count_h[None, :], prices)
    revenue = _dd(rh, rl + count_l[None, :] * prices)  # count_l = 0 below n = 2**24
    return _scaled_gap(revenue, jnp.max(revenue[0], axis=-1), scale)


def _sample_rows(
    key: PRNGKey,
    edges: Array,
    upper: tuple[Array, Array],
    drop: Array,
    right: Array,
    num_lead: int,
    scale: Array | None = None,
    slope: Array | None = None,
) -> tuple[Array, Array]:
    """Exact draws from a piecewise log-linear density, row by row.

    ``edges`` ``(R, m+1)`` non-decreasing; per interval ``(R, m)``: ``upper`` the
    log-density at its larger end as a double-float (``-inf``: never drawn),
    ``drop >= 0`` its fall across the interval, ``right`` whether the larger end
    is the right one, ``slope`` the utility's slope (``None``: 0), with the
    per-row ``scale`` ``(R,)``: the point's density falls at the rate ``scale
    |slope|``, taken exactly in float64 (:func:`jaxdp._cell.point`; the float32
    ``drop`` is rounded, and only the interval's log-mass reads it). Returns
    draws ``(num_lead, R)`` and a per-row flag that some mass is positive.
    """
    num_rows = edges.shape[0]
    a = edges[:, :-1]
    b = edges[:, 1:]
    lh, ll = _log_masses(edges, upper, drop)
    has_mass = jnp.isfinite(jnp.max(lh, axis=-1))
    key_interval, key_point = jax.random.split(key)
    j, _ = _inverse_cdf.from_logits(key_interval, lh, (num_lead, num_rows), low=ll)
    j = jnp.clip(j, 0, a.shape[-1] - 1).T  # (R, num_lead)

    def pick(x: Array) -> Array:
        return jnp.take_along_axis(x, j, axis=1).T

    aj, bj, rj = pick(a), pick(b), pick(right)
    if slope is None:
        return _cell.point(key_point, aj, bj), has_mass
    slope_j = pick(jnp.broadcast_to(slope, a.shape))
    return _cell.point(key_point, aj, bj, scale[None, :], slope_j, rj), has_mass


def _scale(epsilon: Array, sensitivity: Array, monotonic: bool, dtype) -> Array:
    """ε/(2Δ) (ε/Δ when monotonic) rounded *down* (:func:`jaxdp._descent.scale_down`)
    and clamped into the normal range (:func:`jaxdp._logits.clip_scale`)."""
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, dtype)
    return _logits.clip_scale(_descent.scale_down(scale))


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
    arr = _checks.data_array(x, fn, name)
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
    (``SECURITY.md``, "The categorical kernel"), adding its (ε_c', δ_c') for m
    given weights. The m log-masses ``U_j + log w_j + ψ(y_j)`` are computed with
    the utilities ``c + m r`` as exact double-floats and ``log w_j + ψ(y_j)`` in
    float64 (O(m) per row): each within ``a = 4u + ν`` of the exact one at any
    magnitude (``4u`` from the drop ``y_j``'s float32 rounding, ``|y ψ'(y)| <=
    1``), ``u = 2**-24`` and ``ν = 6u² k max|u(r)|`` (negligible unless ``k |u|``
    is near 1e7), so each interval's probability is off by at most a factor
    ``e^(2a)`` on each of two neighbours. The released float is then drawn
    with the exact mass of its cell, the reals that round to it
    (:mod:`jaxdp._cell`: a descent over the interval's float cells, each step's
    probability computed in float64 from the halves' lengths and the rate
    ``k |m|``, driven by one 128-bit uniform): within a factor
    ``e^(±1.5e-12)`` of that mass, up to a total variation of ``1e-19``. So
    each draw is (ε', δ')-DP with ε' ≤ ε + ε_c' + 4a + 3e-12 and δ' ≤ δ_c' +
    1e-19 (1 + e^ε') (float32, at ε = 1: ε + 6.9e-6 for m = 10³ + 1, ε +
    8.4e-6 for m = 10⁶ + 1, δ' ≤ 4.5e-11; ``SECURITY.md``, "Continuous ranges"
    and "The point inside").

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
      The point is a float of the compute dtype (float32, or float64 under
      ``jax.enable_x64()``) drawn with its cell's mass: every float in the
      range can be drawn, down to the subnormal cells next to 0.

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
    scale = _rows.flatten_batch(_scale(epsilon, sensitivity, monotonic, edges.dtype), tail)
    a, b = e[:, :-1], e[:, 1:]
    # The utility at the interval's larger end (the right one for a rising line),
    # as an exact double-float: its float rounding, u |c + m r|, is not bounded by
    # the sensitivity and would move the log-masses by u k |u(r)|.
    u_top = _affine(c, m, jnp.where(m > 0, b, a))
    width = b - a
    best = jnp.max(jnp.where(width > 0, u_top[0], -jnp.inf), axis=-1)
    best = jnp.where(jnp.isfinite(best), best, 0)
    upper = _scaled_gap(u_top, best, scale)
    drop = _drop(scale, jnp.abs(m), width)
    draws, has_mass = _sample_rows(key, e, upper, drop, m > 0, num_lead, scale, m)

    edges_ok = jnp.all(jnp.isfinite(e), axis=-1) & jnp.all(width >= 0, axis=-1)
    edges_ok = edges_ok & (e[:, -1] > e[:, 0]) & jnp.isfinite(e[:, -1] - e[:, 0])
    lines_ok = ~jnp.any(jnp.isnan(c) | (c == jnp.inf), axis=-1) & jnp.all(jnp.isfinite(m), -1)
    lines_ok = lines_ok & ~jnp.any(jnp.isnan(u_top[0]) | (u_top[0] == jnp.inf), axis=-1)
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
    its (ε_c', δ_c') for n + 1 given weights; the double-float log-masses add
    ``4a`` to ε', ``a = 4u + ν`` with ``ν ≤ 3u² ε n`` (the revenues
    ``count · p`` are exact double-floats: rounded to float32 they moved by up to
    ``2u n hi`` more than the sensitivity ``hi`` between neighbours),
    ``u = 2**-24``, and the released float is drawn with its cell's exact mass
    (within ``e^(±1.5e-12)``, up to a total variation of ``1e-19``;
    :mod:`jaxdp._cell`). So ε' ≤ ε + ε_c' + 4a + 3e-12 and δ' ≤ δ_c' + 1e-19
    (1 + e^ε') (ε + 6.9e-6 at n = 10³, ε + 8.4e-6 at n = 10⁶; ``SECURITY.md``,
    "Continuous ranges" and "The point inside").

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      bids: ``[..., n]`` real bids (``n >= 0``; ``+inf`` is a bid above every
        price); values outside ``bounds`` are clipped to them. Leading dims are
        a batch of auctions. Traced or concrete.
      epsilon: ε > 0, number or array broadcasting with the batch shape; may be
        traced.
      bounds: the public pair ``(lo, hi)`` of prices, finite, ``0 <= lo < hi``.
      shape: static draw shape as in :func:`jax.random.categorical`.
      price_range: deprecated name of ``bounds`` (a ``DeprecationWarning``).

    Returns:
      Float prices (float32, float64 under x64) of ``shape`` in ``[lo, hi]``.
      Under tracing, invalid rows (NaN bids, a bad range, ε not finite and > 0)
      give NaN; ``checkify`` reports why.

    Raises:
      ValueError: for NaN bids; ``bounds`` missing, given twice (as
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
    # Δ = hi: one bidder moves the revenue at price p by at most p <= hi.
    scale = _rows.flatten_batch(_scale(epsilon, hi, False, e.dtype), tail)
    upper = _price_logits(e[:, 1:], scale)  # revenue grows with p inside each interval
    count = (n - jnp.arange(n + 1))[None, :]  # #{bids >= p} on [e_j, e_j+1)
    drop = _drop(scale, count.astype(e.dtype), e[:, 1:] - e[:, :-1])
    right = jnp.broadcast_to(count > 0, upper[0].shape)
    draws, has_mass = _sample_rows(key, e, upper, drop, right, num_lead, scale, count)
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
    its (ε_c', δ_c') for n + 1 given weights; the double-float log-masses add
    ``4a`` to ε', ``a = ν + 4e-12`` with ``ν ≤ 6u² ε n`` and ``u = 2**-24`` (the
    density is flat in each interval: its drop is 0 and ``ψ(0) = 0`` exactly; the
    target ``q n`` and the utility ``-|j - q n|`` are exact double-floats: rounded
    to float32, ``q n`` moved between neighbours by ``q ± ulp(q n)``, outside what
    the sensitivity ``max(q, 1 - q)`` covers, up to 2ε from ``q n >= 2**23``).
    The released float is drawn with its cell's exact mass, up to a total
    variation of ``2e-21`` in float32 (``a + U (b - a)`` for a 128-bit uniform
    ``U`` in double-double, rounded correctly; :mod:`jaxdp._cell`), so ε' ≤ ε +
    ε_c' + 4a and δ' ≤ δ_c' + 2e-21 (1 + e^ε') (ε + 6.0e-6 at n = 10³, ε + 7.4e-6
    at n = 10⁶; ``SECURITY.md``, "Continuous ranges" and "The point inside",
    which also gives the float64 figures).

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      data: ``[..., n]`` real, ``n >= 0`` (``±inf`` allowed). Values outside ``bounds`` are
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
      tracing, invalid rows (NaN data, q outside [0, 1], a bad ``bounds``, ε not
      finite and > 0) give NaN; ``checkify`` reports why.

    Raises:
      ValueError: for NaN data; q outside [0, 1] or not finite;
        ``bounds`` not a finite pair with ``lo < hi`` (or whose width overflows);
        a concrete ε not finite and > 0; a bad ``shape``; a batched key. Never
        for data values inside the domain (any value, ``±inf`` included, any n >= 0).

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
    # Sensitivity max(q, 1 - q) (docstring); >= 1/2, so no division by 0.
    scale = _rows.flatten_batch(_scale(epsilon, jnp.maximum(q, 1 - q), False, e.dtype), tail)
    upper = _quantile_logits(_rows.flatten_batch(q, tail), n, scale)
    zeros = jnp.zeros_like(upper[0])
    draws, has_mass = _sample_rows(key, e, upper, zeros, zeros > 0, num_lead)
    valid = bounds_ok & has_mass & _rows.flatten_batch(data_ok, tail)
    valid = valid & _rows.flatten_batch(q_ok & _logits.params_valid(batch, epsilon), tail)
    return jnp.where(valid[None, :], draws, jnp.nan).reshape(shape)
