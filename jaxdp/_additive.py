"""Additive-noise mechanisms: Laplace and the analytic Gaussian mechanism."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _random
from . import _twofloat as _tf
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

#: The resolution of the noise: where the spacing (ulp) of the output dtype at a
#: value exceeds ``NOISE_RESOLUTION * scale``, the release is rounded more coarsely
#: than the noise is fine, and a concrete call warns (:class:`PrecisionWarning`;
#: see :func:`laplace`, "Finite precision").
NOISE_RESOLUTION = 2.0**-10


class PrecisionWarning(UserWarning):
    """A release is rounded more coarsely than its noise: the output dtype's spacing
    at a value exceeds :data:`NOISE_RESOLUTION` of the noise scale. Privacy is not
    affected (the release is the exact sum, rounded: a post-processing); accuracy
    is that spacing. Data never raise, so this is a warning, not an error."""


def _split(host: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``host`` (float64, 64-bit or Python integers) as float32 ``(hi, mid, lo)``
    with ``hi + mid + lo`` equal to each value *exactly*: ``hi`` the nearest
    float32, ``mid`` the nearest to the rest, ``lo`` the rest of that (for float64,
    ``x - hi`` and ``r - mid`` are exact by Sterbenz and 53 bits leave ``lo`` at
    most 5; integers are split in Python's exact arithmetic). Values beyond
    float32's range keep ``hi = ±inf`` (their release rounds to it) and 0 parts;
    the low parts of values near float32's smallest normal may be subnormal,
    which XLA flushes (an absolute error below 2**-126)."""
    if host.dtype == np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            hi = host.astype(np.float32)
            fin = np.isfinite(hi)
            r = np.where(fin, host - hi.astype(np.float64), 0.0)
            mid = r.astype(np.float32)
            lo = (r - mid.astype(np.float64)).astype(np.float32)
        return hi, mid, lo
    flat = [int(v) for v in host.ravel()]
    parts = np.zeros((3, len(flat)), np.float32)
    for i, v in enumerate(flat):
        with np.errstate(over="ignore"):
            hi = np.float32(float(v)) if abs(v) < 2**1000 else np.float32(np.sign(v) * np.inf)
        if not np.isfinite(hi):
            parts[:, i] = (hi, 0, 0)
            continue
        r = v - int(hi)
        mid = np.float32(float(r))
        parts[:, i] = (hi, mid, np.float32(r - int(mid)))  # |r - mid| < 2**17: exact
    hi, mid, lo = (p.reshape(host.shape) for p in parts)
    return hi, mid, lo


def _wide_parts(leaf: Any, wide: np.ndarray | None):
    """``(values for the checks, parts)``: for host values of a wide type, their
    float32 parts (:func:`_split`) and, for the checks and the shapes, ``hi``
    with values beyond float32's range clipped to its largest finite value (their
    release rounds to ±inf, as the exact sum does); else ``(leaf, None)``.
    Non-finite float64 values go to the checks as they are, which refuse them."""
    if wide is None or (wide.dtype == np.float64 and not np.all(np.isfinite(wide))):
        return leaf, None
    parts = _split(wide)
    big = np.finfo(np.float32).max
    return np.clip(parts[0], -big, big), parts


def _needed(parts, values: Array, scale: Array, out_dtype):
    """``parts`` where some value is not float32 (a non-zero low part, or beyond
    float32's range) at a spacing above the resolution, or where the scale is
    traced; else None: resolved values keep the plain float32 sum, the same
    release as before."""
    if parts is None:
        return None
    inexact = (parts[1] != 0) | (parts[2] != 0) | ~np.isfinite(parts[0])
    if not np.any(inexact):
        return None
    if _checks.is_concrete(scale):
        resolved = np.asarray(_resolved(values, jnp.asarray(scale), out_dtype))
        if not np.any(np.broadcast_to(inexact, resolved.shape) & ~resolved):
            return None
    return parts


@_checks.eager
def _values_args(fn, key, values, shape, **params):
    if key is not None:
        key = _checks.single_key(key, fn)
    values = _checks.float_array(values, fn, "values", allow_neg_inf=False)
    dtype = _checks.compute_dtype()
    arrays = {name: jnp.asarray(v, dtype) for name, v in params.items()}
    try:
        batch = tuple(jnp.broadcast_shapes(values.shape, *(a.shape for a in arrays.values())))
    except ValueError as err:
        shapes = ", ".join(f"{k} {a.shape}" for k, a in arrays.items())
        raise ValueError(
            f"{fn}: {shapes} must broadcast with the shape {values.shape} of values"
        ) from err
    shape = _checks.draw_shape(shape, batch, fn, "values")
    return key, values, arrays, shape


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.number, np.bool_)) and not isinstance(x, bool)


def _leaves(values, fn: str, shape):
    """(leaves, treedef, is_tree): a single array (or nested list of numbers) is
    one leaf and keeps the key; a pytree of arrays gets one subkey per leaf."""
    if isinstance(values, (list, tuple)) and not hasattr(values, "_fields"):
        flat = jax.tree_util.tree_leaves(values)
        if flat and all(_is_number(v) or isinstance(v, bool) for v in flat):
            return [values], None, False  # array-like, as jnp.asarray reads it
    leaves, treedef = jax.tree_util.tree_flatten(values)
    if not leaves:  # an empty list is an empty array; an empty dict maps to itself
        if isinstance(values, (list, tuple)) and not hasattr(values, "_fields"):
            return [values], None, False
        return [], treedef, True
    if jax.tree_util.treedef_is_leaf(treedef):
        return leaves, treedef, False
    if shape is not None:
        raise ValueError(
            f"{fn}: shape must be None when values is a pytree (each leaf keeps its own "
            f"shape), got shape={shape!r}"
        )
    return leaves, treedef, True


def _out_dtype(dtype, leaf_dtype, fn: str) -> np.dtype:
    """The release dtype: ``dtype``, else the leaf's floating dtype, else the compute dtype."""
    compute = _checks.compute_dtype()
    if dtype is None:
        if jnp.issubdtype(leaf_dtype, jnp.floating):
            return np.dtype(jax.dtypes.canonicalize_dtype(leaf_dtype))
        return compute
    try:
        out = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"{fn}: dtype must be a floating dtype, got {dtype!r}") from err
    if not jnp.issubdtype(out, jnp.floating):
        raise ValueError(f"{fn}: dtype must be a floating dtype, got {out}")
    return np.dtype(jax.dtypes.canonicalize_dtype(out))


def _map_leaves(fn, key, values, shape, dtype, one):
    """Applies ``one(key, leaf, shape, out_dtype)`` to every leaf of ``values``."""
    key = _checks.single_key(key, fn)
    leaves, treedef, is_tree = _leaves(values, fn, shape)
    if is_tree and not leaves:
        return treedef.unflatten([])  # as jax.tree.map on an empty pytree
    keys = list(jax.random.split(key, len(leaves))) if is_tree else [key]
    outs = []
    for k, leaf in zip(keys, leaves, strict=True):
        leaf_dtype = getattr(leaf, "dtype", None)
        if leaf_dtype is None:
            try:
                leaf_dtype = np.asarray(leaf).dtype
            except (TypeError, ValueError):
                leaf_dtype = np.dtype(np.float64)  # float_array raises the error
        outs.append(one(k, leaf, shape, _out_dtype(dtype, leaf_dtype, fn)))
    return treedef.unflatten(outs) if is_tree else outs[0]


def _spacing(x: Array, dtype) -> Array:
    """The spacing (ulp) of ``dtype`` at ``|x|``, computed in ``x``'s dtype.

    ``x`` is first rounded to ``dtype`` (so a value that rounds up into the next
    binade gets that binade's spacing). Exact: a power of two, or the smallest
    subnormal of ``dtype`` near 0.
    """
    info = jnp.finfo(dtype)
    ax = jnp.abs(x.astype(dtype).astype(x.dtype))
    _, e = jnp.frexp(ax)  # ax = m 2**e, m in [0.5, 1)
    ulp = jnp.ldexp(jnp.ones_like(ax), e - 1 - info.nmant)
    ulp = jnp.where(ax == 0, jnp.zeros_like(ulp), ulp)
    return jnp.maximum(ulp, jnp.asarray(info.smallest_subnormal, x.dtype))


def _resolved(values: Array, scale: Array, dtype) -> Array:
    """Elementwise: the spacing of ``dtype`` at the value is at most
    ``NOISE_RESOLUTION * scale`` (False where the value is not finite, in its own
    dtype or in ``dtype``: 7e4 is beyond float16)."""
    ok = _spacing(values, dtype) <= NOISE_RESOLUTION * scale
    return ok & jnp.isfinite(values) & jnp.isfinite(values.astype(dtype))


@_checks.eager
def _warn_unresolved(fn: str, values: Array, scale: Array, dtype, what: str) -> None:
    """Warns (:class:`PrecisionWarning`) when a concrete value's spacing in ``dtype``
    exceeds the resolution. Never raises: the values are data."""
    if not (_checks.is_concrete(values) and _checks.is_concrete(scale)) or not values.size:
        return
    shape = jnp.broadcast_shapes(values.shape, scale.shape)
    v = jnp.broadcast_to(values, shape)
    b = jnp.broadcast_to(scale, shape)
    bad = ~_resolved(v, b, dtype) & jnp.isfinite(b)
    if bool(jnp.any(bad)):
        first = tuple(int(i) for i in np.argwhere(np.asarray(bad))[0])
        name = np.dtype(dtype).name
        warnings.warn(
            f"{fn}: values{list(first) if first else ''} = {_checks._fmt(v[first])} has "
            f"{name} spacing {_checks._fmt(_spacing(v[first], dtype))}, more than "
            f"{NOISE_RESOLUTION:g} (2**-10) of the noise {what} {_checks._fmt(b[first])}: "
            f"the release there is the exact sum rounded to that spacing, so its noise is "
            "partly or wholly lost to rounding (privacy is unaffected; accuracy is the "
            "spacing). Centre the values, or use granularity= (laplace), a wider dtype= "
            "or jax.enable_x64()",
            PrecisionWarning,
            stacklevel=6,
        )


def laplace(
    key: PRNGKey,
    values: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    granularity: float | None = None,
) -> Any:
    r"""The Laplace mechanism: ``values`` plus Laplace noise of scale Δ₁/ε.

    .. math::

        M(x) = f(x) + (Z_1, \dots, Z_d), \qquad Z_i \overset{iid}{\sim}
        \mathrm{Lap}(\Delta_1/\varepsilon), \quad p(z) = \tfrac{\varepsilon}{2\Delta_1}
        e^{-\varepsilon |z| / \Delta_1}

    With ``granularity`` γ (a power of two) the release lies on the grid γℤ:

    .. math::

        M(x) = \gamma\,\big(\lfloor f(x)/\gamma + \tfrac12 \rfloor + K\big), \qquad
        \Pr[K = k] \propto e^{-\varepsilon |k| / N}, \quad
        N = \lceil \Delta_1/\gamma \rceil

    (the discrete Laplace, or two-sided geometric, law on the integers).

    **Privacy.** ε-DP when ``sensitivity`` is the L1 sensitivity Δ₁ of the whole
    vector ``values`` = f(x) (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth
    2014, Thm 3.6). Each leading draw of ``shape`` is a separate release.

    The continuous version computes ``f(x) + b·Z`` in floating point, whose set
    of reachable outputs depends on f(x): Mironov (2012) showed that this can
    reveal f(x) exactly from a single release, whatever ε. It is *not* defended
    here. The granular version is: rounding to γℤ (γ a power of two, so the
    division is exact) and adding integer noise makes the output a
    post-processing of the exact integer ``round(f(x)/γ) + K``, the discrete
    Laplace mechanism (Ghosh, Roughgarden & Sundararajan 2009; the "granular"
    noise of Google's secure-noise library). For a scalar f the grid sensitivity
    is exactly N, so the release is ε-DP at the stated ε. For a vector whose
    L1 change Δ₁ spreads over m coordinates, each rounding adds at most one
    grid step, so the **adjusted epsilon** is ε (Δ₁/γ + m) / N ≤ ε (1 + mγ/Δ₁):
    choose γ ≪ Δ₁/m (e.g. γ = 2**-20 Δ₁ costs a factor 1 + m·2**-20). In
    float32 the noise's law is resolved to about 2**-32 per outcome, which
    adds about 1e-5 to ε and 1e-9 to δ per coordinate at ε ≤ 1 (see **Finite
    precision**).

    **Finite precision.** *Granular* (``granularity=γ``): the release is the
    exact grid point ``γ (round(f/γ) + K)`` (``round`` to the nearest integer,
    ties up, computed exactly; host float64 and int64 values are gridded in
    float64) rounded once to the output dtype: exact wherever the dtype holds
    every reachable grid point, and otherwise (a concrete call then warns) a
    post-processing that costs accuracy, not privacy. So the only
    losses are the adjusted ε above and the law of the noise: ``K`` is a
    difference of two ``floor(E·s)``, ``s = N/ε`` the scale in grid steps,
    ``E = -log v`` with ``v`` an open 32-bit uniform (``E ≤ 22.9``). Each
    ``floor(E·s)`` has the right law only up to the uniform's absolute
    resolution (``2**-32``, and the float32 rounding of ``v``, ``log`` and the
    product), a *relative* error that grows in the far tail, and the law is
    truncated at ``22.9 s``. An exact computation of the implemented law of K
    (``SECURITY.md``, "``laplace(granularity=γ)``") puts it within a factor
    ``e**(±6.3e-6)`` of the discrete Laplace for ``|k| ≤ 10 s``, and gives, per
    coordinate, a hockey-stick divergence at ``ε + 1e-5`` of 8e-10 to 1e-9 at
    ε = 1 (N = 1 to 1000; 4e-10 at ε = 0.1) and 5.2e-8 at ε = 5: about
    **(ε(1 + mγ/Δ₁) + 1e-5, 1e-9)-DP per coordinate at ε ≤ 1** in float32, δ'
    growing with ε. These are computed values for those parameters, not a
    proof for all of them; under ``jax.enable_x64`` the uniforms have 64 bits
    and the same effects are below 1e-15.
    *Continuous* (default): there is **no** finite-precision bound: the
    floating-point noise takes a data-independent set of values with gaps, and
    Mironov's (2012) attack can read f(x) from a single release at any ε. What
    the continuous path does guarantee is that the release is the *exact* sum
    ``f(x) + N'`` (``N' = fl(b·Z)``, b = Δ₁/ε) rounded once to the output dtype, a
    post-processing, for every value: IEEE addition rounds correctly, and host
    values of float64 or 64-bit integers (with x64 off, where ``jnp.asarray``
    would round them to float32 first, or wrap int64 modulo 2**32) are split
    into three float32 parts that hold them exactly and join the sum exactly,
    whenever some value's output spacing (ulp) exceeds ``NOISE_RESOLUTION =
    2**-10`` of b. Below that resolution the input rounding is what the bound covers: the
    rounding of the sum is at most b·2**-11 (P[release == value] ≤ 2**-11), and
    a value rounded on input moves by at most ulp/2 ≤ b·2**-11, so declaring Δ₁
    + m·ulp/2 instead of Δ₁ (ε' ≤ ε + m·2**-11) covers it. **Data never raise**
    (an error that depends on one record is an output its neighbour never
    produces): where the spacing exceeds the resolution, the release is rounded
    more coarsely than the noise is fine, possibly to the value itself, and a
    concrete call warns (``jaxdp._additive.PrecisionWarning``, naming the value
    and the scale); accuracy is then the spacing, privacy is as stated for the
    values as given. Values rounded *upstream* (f computed in float64 and cast
    inside your ``jit``) carry that rounding in their sensitivity. In float32 the
    resolution holds for |value| up to about 2**13·b; bfloat16 outputs (8
    significant bits) only to about b/8: pass ``dtype=jnp.float32`` for larger
    values, centre them, or use ``granularity=``, the remedy with a proven
    guarantee.

    Pytrees: ``values`` may be a pytree of arrays (e.g. a gradient dict); the key
    is split once into one subkey per leaf (in ``jax.tree_util`` leaf order) and
    each leaf gets independent noise. Δ₁ is then the L1 sensitivity of all
    leaves together. ``epsilon`` and ``sensitivity`` broadcast with every leaf.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      values: ``[...]`` real array f(x), finite.
      epsilon: ε > 0; number or array broadcasting with ``values``; may be traced.
      sensitivity: Δ₁ > 0, L1 sensitivity of f; same rules.
      shape: static output shape, broadcast-compatible with ``values`` (leading
        dims are i.i.d. releases); ``None`` gives ``values``' shape. Must be
        ``None`` when ``values`` is a pytree.
      dtype: the output dtype, a floating dtype, as in :mod:`jax.random`;
        default: each leaf's floating dtype (bfloat16 in, bfloat16 out), or the
        compute dtype for integer values. Noise is computed in float32 (float64
        under x64) and rounded once to ``dtype``; the resolution rule above
        applies in ``dtype``.
      granularity: ``None`` (continuous noise) or a static Python float γ > 0
        that is a power of two: the output grid. The noise scale in grid steps,
        N/ε, must stay below 2**19 in float32 (2**48 in float64) so that every
        integer of the noise range is representable; pick a coarser γ, or
        ``jax_enable_x64``, otherwise.

    Returns:
      Array of ``shape`` in ``dtype`` (a pytree of such arrays for a pytree).
      Under tracing, invalid ε or Δ, NaN or infinite values (or, with
      ``granularity``, a noise scale over the limit) give NaN; ``checkify``
      reports each.

    Raises:
      ValueError: ε or Δ not finite and > 0 (in the compute dtype); NaN or
        infinite values; bad ``shape``, ``dtype`` or key; ``granularity`` not a
        positive power of two, or too fine for ε and Δ (concrete). Finite values
        never raise, however large (see **Finite precision**).

    Warns:
      PrecisionWarning: (``jaxdp._additive``) a concrete value whose spacing in
        ``dtype`` exceeds 2**-10 of the scale, or, with ``granularity``, whose
        reachable grid points ``dtype`` does not hold exactly.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.laplace(jax.random.key(0), jnp.zeros(3), epsilon=1.0,
      ...               sensitivity=1.0).shape
      (3,)
      >>> y = jaxdp.laplace(jax.random.key(0), jnp.zeros(1000), epsilon=1.0,
      ...                   sensitivity=1.0, granularity=2.0**-10)
      >>> bool(jnp.all(y * 2**10 == jnp.round(y * 2**10)))
      True

    References:
      C. Dwork, F. McSherry, K. Nissim and A. Smith, `Calibrating Noise to
      Sensitivity in Private Data Analysis <https://doi.org/10.1007/11681878_14>`_,
      TCC 2006.
      I. Mironov, `On Significance of the Least Significant Bits for Differential
      Privacy <https://doi.org/10.1145/2382196.2382264>`_, CCS 2012.
      A. Ghosh, T. Roughgarden and M. Sundararajan, `Universally Utility-Maximizing
      Privacy Mechanisms <https://doi.org/10.1145/1536414.1536464>`_, STOC 2009.
    """
    fn = "laplace"
    _checks.positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    granularity = _granularity(granularity, fn)
    if granularity is None:
        _check_scale(fn, "the noise scale sensitivity / epsilon", sensitivity, epsilon)

    def one(key, leaf, shape, out_dtype):
        wide = _checks.wide_host(leaf, floats=True)
        if granularity is not None and wide is not None:
            wide = _grid_host(wide, granularity)  # exact grid points of host values
        checked, parts = _wide_parts(leaf, wide)
        _, values, p, shape = _values_args(
            fn, None, checked, shape, epsilon=epsilon, sensitivity=sensitivity
        )
        if granularity is None:
            scale = p["sensitivity"] / p["epsilon"]
            _warn_unresolved(fn, values, scale, out_dtype, "scale")
            parts = _needed(parts, values, scale, out_dtype)
        else:
            _check_grid(fn, values, epsilon, sensitivity, granularity, out_dtype)
            # The float32 path grids the rounded value: the same points unless the
            # rounding moved one, or a point needs more than float32.
            if parts is not None and not np.any(parts[1] != 0) and not np.any(parts[2] != 0):
                same = _grid_host(np.asarray(values, np.float64), granularity)
                if np.all(parts[0].astype(np.float64) == same):
                    parts = None
        return _laplace_impl(
            key,
            values,
            parts,
            p["epsilon"],
            p["sensitivity"],
            shape=shape,
            granularity=granularity,
            out_dtype=out_dtype,
        )

    return _map_leaves(fn, key, values, shape, dtype, one)


def _scale_ok(scale: Array) -> Array:
    """The noise scale is a positive, finite, normal float (not 0 or subnormal, where
    the noise would vanish, nor infinite)."""
    tiny = jnp.finfo(scale.dtype).tiny
    return jnp.isfinite(scale) & (scale >= tiny)


@_checks.eager
def _check_scale(fn: str, what: str, numerator, epsilon) -> None:
    """Raises when a concrete noise scale (``numerator / epsilon``, or ``numerator``
    itself when ``epsilon`` is None) is not a positive, finite, normal float of the
    compute dtype: ε and Δ are each fine, their ratio is not (1e30 / 1e-30)."""
    if not all(_checks.is_concrete(v) for v in (numerator, epsilon)):
        return
    ratio = np.asarray(numerator, np.float64)
    if epsilon is not None:
        with np.errstate(all="ignore"):
            ratio = ratio / np.asarray(epsilon, np.float64)
    info = np.finfo(_checks.compute_dtype())
    bad = ~((ratio >= float(info.tiny)) & (ratio <= float(info.max)))
    if np.any(bad):
        value = ratio[bad].ravel()[0] if ratio.ndim else float(ratio)
        raise ValueError(
            f"{fn}: {what} = {value!r} is not a positive, finite, normal "
            f"{np.dtype(info.dtype).name} (between {float(info.tiny):g} and "
            f"{float(info.max):g}): the noise would overflow or vanish"
        )


def _granularity(value, fn: str) -> float | None:
    """None, or a Python float that is a positive, normal power of two."""
    if value is None:
        return None
    if isinstance(value, bool) or not _checks.is_concrete(value):
        raise ValueError(f"{fn}: granularity must be None or a static power of two, got {value!r}")
    try:
        gamma = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: granularity must be a power of two, got {value!r}") from err
    info = np.finfo(_checks.compute_dtype())
    if not (math.isfinite(gamma) and gamma > 0 and math.frexp(gamma)[0] == 0.5):
        raise ValueError(f"{fn}: granularity must be a positive power of two, got {value!r}")
    if not float(info.tiny) <= gamma <= float(info.max):
        raise ValueError(f"{fn}: granularity {gamma!r} is outside the normal range of {info.dtype}")
    return gamma


def _grid_limit(dtype) -> float:
    """Largest noise scale in grid steps whose tail (22.9 scales in float32,
    45 in float64) stays below 2**(mantissa bits + 1): all integers representable."""
    return 2.0 ** (np.finfo(dtype).nmant - 4)


def _noise_tail(dtype) -> float:
    """Largest |Exp(1)| variate of :mod:`jaxdp._random` (``-log`` of its smallest
    uniform, 2**-33 in float32 and 2**-65 in float64)."""
    return (np.finfo(dtype).bits + 1) * math.log(2.0)


def _grid_exact(values: Array, steps: Array, gamma: float, out_dtype) -> Array:
    """Elementwise: every point of the grid γℤ that the release can reach
    (|value| + the noise tail, plus one step of rounding) is exactly
    representable in the compute dtype and in ``out_dtype``."""
    dtype = values.dtype
    reach = jnp.abs(values) + (steps * _noise_tail(dtype) + 1) * jnp.asarray(gamma, dtype)
    nmant = min(np.finfo(dtype).nmant, np.finfo(out_dtype).nmant)
    # Integers k·γ with |k| <= 2**(nmant+1) are exact (γ a power of two).
    limit = jnp.asarray(gamma * 2.0 ** (nmant + 1), dtype)
    tiny = jnp.asarray(gamma, dtype) >= float(np.finfo(out_dtype).smallest_subnormal)
    return (reach <= limit) & tiny & jnp.isfinite(values)


@_checks.eager
def _check_grid(fn, values, epsilon, sensitivity, gamma, out_dtype):
    if not all(_checks.is_concrete(v) for v in (values, epsilon, sensitivity)):
        return
    dtype = values.dtype
    steps = np.ceil(np.asarray(sensitivity, np.float64) / gamma) / np.asarray(epsilon, np.float64)
    if np.max(steps) > _grid_limit(dtype):
        raise ValueError(
            f"{fn}: granularity {gamma!r} is too fine: the noise scale is "
            f"{np.max(steps):.3g} grid steps, over the limit {_grid_limit(dtype):.3g} of "
            f"{np.dtype(dtype).name}; use a coarser granularity or jax_enable_x64"
        )
    steps_arr = jnp.asarray(steps, dtype)
    ok = _grid_exact(values, steps_arr, gamma, out_dtype)
    if values.size and not bool(jnp.all(ok)):
        shape = jnp.broadcast_shapes(values.shape, steps_arr.shape)
        bad = ~jnp.broadcast_to(ok, shape)
        first = tuple(int(i) for i in np.argwhere(np.asarray(bad))[0])
        v = jnp.broadcast_to(values, shape)[first]
        warnings.warn(
            f"{fn}: values{list(first) if first else ''} = {_checks._fmt(v)} plus the noise "
            f"tail does not fit the grid granularity={gamma!r} exactly in "
            f"{np.dtype(out_dtype).name}: the release there is the exact grid point, "
            "rounded to the dtype (privacy is unaffected; accuracy is the dtype's "
            "spacing). Use a coarser granularity, a centred value, a wider dtype= or "
            "jax.enable_x64()",
            PrecisionWarning,
            stacklevel=6,
        )


def _grid_host(host: np.ndarray, gamma: float) -> np.ndarray:
    """Host values rounded to the nearest point of γℤ (as :func:`_laplace_impl`
    does in the compute dtype), exactly: float64 (at or above ``γ 2**52`` a float64
    is already a multiple of γ), or integers (Python ints: on the grid already
    when γ <= 1)."""
    if host.dtype != np.float64:
        if gamma <= 1:
            return host
        g = int(gamma)
        flat = [((2 * int(v) + g) // (2 * g)) * g for v in host.ravel()]  # floor(v/γ + 1/2) γ
        return np.array(flat, dtype=object).reshape(host.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        big = np.abs(host) >= gamma * 2.0**52
        q = np.where(big, 0.0, host) / gamma
        return np.where(big, host, _round_half_up(q) * gamma)


def _round_half_up(q):
    """``floor(q + 1/2)`` of the exact ``q`` (NumPy or JAX floats), the nearest
    integer with ties up, so that ``round(q + N) = round(q) + N`` for integers ``N``
    (values Δ apart land at most ``ceil(Δ/γ)`` grid steps apart). ``q - floor(q)``
    is exact, whereas the rounded sum ``q + 1/2`` is 1 for ``q = 1/2 - 2**-25`` in
    float32, whose nearest integer is 0."""
    fl = jnp.floor(q) if isinstance(q, jax.Array) else np.floor(q)
    return fl + ((q - fl) >= 0.5)


def _odd_add(a: Array, b: Array) -> Array:
    """``a + b`` rounded *to odd*: the nearest float, moved one ulp away from an even
    last bit when the sum is inexact (the error of TwoSum is not 0)."""
    r, err = _tf.two_sum(a, b)
    word = {4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(r.dtype).itemsize]
    bits = jax.lax.bitcast_convert_type(r, word)
    inexact_even = (err != 0) & ((bits & 1) == 0)
    away = (err > 0) == (r > 0)  # the exact value is farther from 0 than r
    one = jnp.ones_like(bits)
    bits = jnp.where(inexact_even, jnp.where(away, bits + one, bits - one), bits)
    return jax.lax.bitcast_convert_type(bits, r.dtype)


def _exact_sum(hi: Array, mid: Array, lo: Array, noise: Array) -> Array:
    """``hi + mid + lo + noise`` rounded once to the nearest float (ties to even):
    so the release is a post-processing of the exact sum. TwoSums turn the four
    terms into an exact expansion ``h + t1 + w + x`` whose head ``h`` is the
    rounded sum of the two largest parts; the tail is added *rounded to odd*,
    smallest first, and the head last, rounded to nearest (Boldo & Melquiond
    2008, rounding to odd). Checked against exact rational arithmetic on 10**5
    adversarial cases (ties, float32 midpoints of int64 values from 2**30 to
    2**62, cancellation; ``tests/test_additive.py``). The noise passes an
    optimization barrier: a product contracted into the first sum (an FMA)
    would break TwoSum. A non-finite sum (an overflow) is returned as it is."""
    noise = jax.lax.optimization_barrier(noise)
    s, e = _tf.two_sum(hi, noise)
    t, f = _tf.two_sum(mid, lo)
    p, q = _tf.two_sum(e, t)
    w, x = _tf.two_sum(q, f)
    h, t1 = _tf.two_sum(s, p)
    out = h + _odd_add(t1, _odd_add(w, x))
    return jnp.where(jnp.isfinite(s), out, s)


@partial(jax.jit, static_argnames=("shape", "granularity", "out_dtype"))
def _laplace_impl(key, values, parts, epsilon, sensitivity, *, shape, granularity, out_dtype):
    """The release. ``parts`` (None, or the float32 parts of host values of a wide
    type, :func:`_split`; with ``granularity``, of their grid points) replace
    ``values`` in the sum, which is then exact (:func:`_exact_sum`)."""
    fn = "laplace"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    debug_check(jnp.all(jnp.isfinite(values)), f"{fn}: values must be finite (no NaN or inf)")
    ok = _checks.positive_ok(epsilon) & _checks.positive_ok(sensitivity)
    dtype = values.dtype
    if granularity is None:
        scale = sensitivity / epsilon
        ok = ok & _scale_ok(scale)
        debug_check(
            jnp.all(ok | ~_checks.positive_ok(epsilon)),
            f"{fn}: the noise scale "
            "sensitivity / epsilon overflows or vanishes in the compute dtype",
        )
        scale = jnp.where(ok, scale, jnp.nan)
        noise = jnp.broadcast_to(scale, shape) * _random.laplace(key, shape, dtype)
        if parts is None:
            out = jnp.broadcast_to(values, shape) + noise
        else:
            out = _exact_sum(*(jnp.broadcast_to(jnp.asarray(q), shape) for q in parts), noise)
        return jnp.where(jnp.broadcast_to(ok, shape), out, jnp.nan).astype(out_dtype)
    gamma = jnp.asarray(granularity, dtype)
    steps = jnp.ceil(sensitivity / gamma) / epsilon  # noise scale in grid steps
    fits = jnp.all(steps <= _grid_limit(dtype))
    debug_check(fits, "laplace: granularity too fine for epsilon and sensitivity")
    k = _random.discrete_laplace(key, shape, jnp.broadcast_to(steps, shape), dtype)
    if parts is not None:  # the parts of the grid points of host values
        out = _exact_sum(*(jnp.broadcast_to(jnp.asarray(q), shape) for q in parts), k * gamma)
    else:
        # At or above γ 2**nmant a value is already a multiple of γ, and the
        # release is that value plus γk rounded once; below, q = values/γ is exact
        # (γ a power of two) and so is floor(q + 1/2). Either way the release is
        # the exact grid point rounded once (a post-processing), never an overflow
        # of values/γ.
        big = jnp.abs(values) >= gamma * 2.0 ** np.finfo(dtype).nmant
        q = jnp.where(big, jnp.zeros_like(values), values) / gamma
        grid = _round_half_up(q)
        on_grid = (jnp.broadcast_to(grid, shape) + k) * gamma
        out = jnp.where(
            jnp.broadcast_to(big, shape), jnp.broadcast_to(values, shape) + k * gamma, on_grid
        )
    valid = jnp.broadcast_to(ok & fits, shape)
    return jnp.where(valid, out, jnp.nan).astype(out_dtype)


# ----------------------------------------------------------------------------- Gaussian

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_ndtr(x: float) -> float:
    """log Phi(x) in float64, accurate from x = -1e150 to +40."""
    if x > 5.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    if x > -37.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    # Asymptotic series of Mills' ratio; the terms beyond x**-8 are < 1e-13 here.
    z = 1.0 / (x * x)
    series = 1 - z + 3 * z**2 - 15 * z**3 + 105 * z**4
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(series)


def _log_delta_of(t: float, epsilon: float) -> float:
    """log of Balle & Wang's delta(sigma) for sigma = t * Delta (Thm 8)."""
    a = 1.0 / (2 * t) - epsilon * t
    b = -1.0 / (2 * t) - epsilon * t
    la, lb = _log_ndtr(a), _log_ndtr(b)
    r = epsilon + lb - la  # log(e^eps Phi(b) / Phi(a)) < 0
    if r >= 0:
        return -math.inf
    return la + math.log(-math.expm1(r))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    r"""The smallest σ for which N(0, σ²) noise is (ε, δ)-DP at L2 sensitivity Δ₂.

    Solves Balle & Wang (2018), Thm 8,

    .. math::

        \Phi\!\left(\frac{\Delta}{2\sigma} - \frac{\varepsilon\sigma}{\Delta}\right)
        - e^{\varepsilon}\,\Phi\!\left(-\frac{\Delta}{2\sigma}
        - \frac{\varepsilon\sigma}{\Delta}\right) \le \delta,

    in float64 and in log space (so δ down to 1e-300 and ε up to 1e6 are
    stable), by bisection on log σ; returns the upper end of the final bracket,
    which satisfies the inequality.
    """
    epsilon, delta, sensitivity = float(epsilon), float(delta), float(sensitivity)
    log_delta = math.log(delta)
    lo, hi = -1.0, 1.0  # bracket in log t, t = sigma / Delta
    while _log_delta_of(math.exp(hi), epsilon) > log_delta:
        lo, hi = hi, hi * 2 if hi > 0 else 1.0
    while _log_delta_of(math.exp(lo), epsilon) <= log_delta:
        hi, lo = lo, lo * 2 if lo < 0 else -1.0
        if lo < -700:
            break
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _log_delta_of(math.exp(mid), epsilon) > log_delta:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return math.exp(hi) * sensitivity


def _sigma_up(epsilon, delta, sensitivity, dtype) -> np.ndarray:
    """Elementwise :func:`analytic_gaussian_sigma`, rounded *up* into ``dtype``.

    The float64 solution is the upper end of a bisection bracket whose test
    ``log delta(sigma) <= log delta`` holds there; it is multiplied by
    ``1 + 2**-40`` (covering the float64 evaluation error of that test, whose
    relative effect on sigma is below 1e-13 for the ranges accepted here), then
    rounded to ``dtype`` and moved one ulp up if the rounding went down. So the
    returned sigma is never below the exact analytic minimum. Invalid inputs
    (not finite, epsilon or sensitivity <= 0, delta outside (0, 1)) give NaN.
    """
    e, d, s = np.broadcast_arrays(
        *(np.asarray(v, np.float64) for v in (epsilon, delta, sensitivity))
    )
    out = np.full(e.shape, np.nan)
    for idx in np.ndindex(e.shape):
        ei, di, si = float(e[idx]), float(d[idx]), float(s[idx])
        if not (all(math.isfinite(v) for v in (ei, di, si)) and ei > 0 and si > 0 and 0 < di < 1):
            continue
        try:
            out[idx] = analytic_gaussian_sigma(ei, di, si) * (1 + 2.0**-40)
        except (OverflowError, ValueError, ZeroDivisionError):
            continue
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):
        low = out.astype(dtype)
    up = np.nextafter(low, dtype.type(np.inf))
    return np.where(low.astype(np.float64) < out, up, low).astype(dtype)


def _analytic_sigma_traced(epsilon: Array, delta: Array, sensitivity: Array) -> Array:
    """The float64 host solution for traced ε, δ, Δ, through :func:`jax.pure_callback`.

    A float32 bisection in ``jnp`` came out up to 1.3 % *below* the analytic
    minimum (cancellation in ``Phi(a) - e^eps Phi(b)`` for small ε), so the traced
    path calls the same float64 solver as concrete inputs, rounded up
    (:func:`_sigma_up`): traced and concrete σ are identical. ``vmap`` passes the
    whole batch to one host call.
    """
    dtype = jnp.result_type(epsilon, delta, sensitivity)
    shape = jnp.broadcast_shapes(jnp.shape(epsilon), jnp.shape(delta), jnp.shape(sensitivity))
    return jax.pure_callback(
        lambda e, d, s: _sigma_up(e, d, s, dtype),
        jax.ShapeDtypeStruct(shape, dtype),
        epsilon,
        delta,
        sensitivity,
        vmap_method="broadcast_all",
    )


def gaussian(
    key: PRNGKey,
    values: ArrayLike,
    *,
    epsilon: ArrayLike,
    delta: ArrayLike,
    sensitivity: ArrayLike,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
) -> Any:
    r"""The analytic Gaussian mechanism: ``values`` plus N(0, σ²) noise.

    σ is the smallest value satisfying Balle & Wang (2018), Thm 8:

    .. math::

        \Phi\!\left(\frac{\Delta_2}{2\sigma} - \frac{\varepsilon\sigma}{\Delta_2}\right)
        - e^{\varepsilon}\,\Phi\!\left(-\frac{\Delta_2}{2\sigma}
        - \frac{\varepsilon\sigma}{\Delta_2}\right) \le \delta

    found by bisection in float64 (for traced ε, δ, Δ too) and rounded up.

    **Privacy.** (ε, δ)-DP for f of L2 sensitivity Δ₂ (Balle & Wang 2018, Thm 8,
    an exact characterisation, valid for every ε > 0, unlike the classical
    σ = Δ₂ √(2 ln(1.25/δ)) / ε of Dwork & Roth Thm A.1, which needs ε < 1 and
    adds more noise).

    **σ is never rounded down.** Concrete and traced ε, δ, Δ use the same
    float64 solver (traced ones through :func:`jax.pure_callback`; a float32
    bisection was up to 1.3 % low for small ε): the upper end of a bisection
    bracket on which the inequality holds, times ``1 + 2**-40`` for its float64
    evaluation error, then rounded *up* into the compute dtype (one ulp up
    whenever rounding to nearest went down). So σ ≥ the analytic minimum, and
    the implemented σ exceeds it by at most 2**-23 (float32) relative.

    **Finite precision.** The noise is Box–Muller with a 64-bit radius uniform:
    ``|Z| ≤ 9.4``, so the truncated tail adds δ' ≤ 2Φ(-9.4) ≈ 5.5e-21 per
    coordinate; the shape of the law inside is float32 (relative errors of a
    few u = 2**-24 in the density away from the tail). As for continuous
    :func:`laplace` there is **no** bound against Mironov's (2012)
    floating-point attack (the set of reachable noise values has gaps), and
    the release is the **exact sum rounded once** (host float64 and int64
    values join it exactly where the output spacing exceeds 2**-10 σ); data
    never raise: where the spacing at a value exceeds 2**-10 σ, a concrete call
    warns (``PrecisionWarning``) and the noise is partly or wholly lost to that
    rounding, at no cost in privacy. A discrete (granular)
    Gaussian is not provided; use ``laplace(granularity=...)`` when a proven
    finite-precision guarantee is needed. Pytrees and ``dtype`` as in
    :func:`laplace` (Δ₂ is the L2 sensitivity of all leaves together).

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      values: ``[...]`` real array f(x), finite.
      epsilon: ε > 0; number or array broadcasting with ``values``; may be traced.
      delta: 0 < δ < 1; same rules.
      sensitivity: Δ₂ > 0, the L2 sensitivity of f; same rules.
      shape: static output shape, broadcast-compatible with ``values``; ``None``
        for a pytree.
      dtype: the output floating dtype; default: each leaf's floating dtype, or
        the compute dtype for integer values (see :func:`laplace`).

    Returns:
      Array of ``shape`` in ``dtype`` (a pytree of them for a pytree). Under
      tracing, invalid parameters and NaN or infinite values give NaN;
      ``checkify`` reports each.

    Raises:
      ValueError: ε or Δ not finite and > 0, δ outside (0, 1) (in the compute
        dtype); NaN or infinite values; bad ``shape``, ``dtype`` or key. Finite
        values never raise, however large.

    Warns:
      PrecisionWarning: (``jaxdp._additive``) a concrete value whose spacing in
        ``dtype`` exceeds 2**-10 σ: its release is the exact sum rounded to that
        spacing, as for :func:`laplace`.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.gaussian(jax.random.key(0), jnp.zeros(3), epsilon=1.0, delta=1e-5,
      ...                sensitivity=1.0).shape
      (3,)

    References:
      B. Balle and Y.-X. Wang, `Improving the Gaussian Mechanism for Differential
      Privacy: Analytical Calibration and Optimal Denoising
      <https://arxiv.org/abs/1805.06530>`_, ICML 2018.
    """
    fn = "gaussian"
    _checks.positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.unit_interval_open(fn, delta=delta)
    concrete = all(_checks.is_concrete(v) for v in (epsilon, delta, sensitivity))
    sigma = None
    if concrete:
        sigma = jnp.asarray(_sigma_up(epsilon, delta, sensitivity, _checks.compute_dtype()))
        _check_scale(fn, "the noise standard deviation sigma", sigma, None)

    def one(key, leaf, shape, out_dtype):
        checked, parts = _wide_parts(leaf, _checks.wide_host(leaf, floats=True))
        _, values, p, shape = _values_args(
            fn, None, checked, shape, epsilon=epsilon, delta=delta, sensitivity=sensitivity
        )
        if sigma is not None:
            _warn_unresolved(fn, values, sigma, out_dtype, "standard deviation")
        parts = _needed(parts, values, sigma, out_dtype)
        return _gaussian_impl(
            key,
            values,
            parts,
            p["epsilon"],
            p["delta"],
            p["sensitivity"],
            sigma,
            shape=shape,
            out_dtype=out_dtype,
        )

    return _map_leaves(fn, key, values, shape, dtype, one)


@partial(jax.jit, static_argnames=("shape", "out_dtype"))
def _gaussian_impl(key, values, parts, epsilon, delta, sensitivity, sigma, *, shape, out_dtype):
    """The release; ``parts`` as in :func:`_laplace_impl`."""
    fn = "gaussian"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    ok_delta = jnp.all((delta > 0) & (delta < 1))
    debug_check(ok_delta, f"{fn}: delta must be in (0, 1), got {{}}", delta)
    debug_check(jnp.all(jnp.isfinite(values)), f"{fn}: values must be finite (no NaN or inf)")
    if sigma is None:
        sigma = _analytic_sigma_traced(epsilon, delta, sensitivity)
    ok = _checks.positive_ok(epsilon) & _checks.positive_ok(sensitivity) & ok_delta
    debug_check(
        jnp.all(_scale_ok(sigma) | ~ok), f"{fn}: sigma overflows or vanishes in the compute dtype"
    )
    ok = ok & _scale_ok(sigma)
    sigma = jnp.where(ok, sigma, jnp.nan)
    noise = _random.normal(key, shape, values.dtype)  # tails to 9.4 sigma (SECURITY.md)
    noise = jnp.broadcast_to(sigma, shape) * noise
    if parts is None:
        out = jnp.broadcast_to(values, shape) + noise
    else:
        out = _exact_sum(*(jnp.broadcast_to(jnp.asarray(q), shape) for q in parts), noise)
    return jnp.where(jnp.broadcast_to(ok, shape), out, jnp.nan).astype(out_dtype)
