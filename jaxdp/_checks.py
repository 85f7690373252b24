"""Argument checking shared by every public function.

The public layer of each sampler is plain Python: it calls the ``*_concrete``
helpers here, which raise :class:`ValueError` naming the function, the
parameter and the offending value. Values that are JAX tracers (inside a
user's ``jit``/``vmap``) cannot raise; the jitted inner layer calls
:func:`debug_check_positive` and friends instead, which go through
:func:`jaxdp._debug_check.debug_check`: reported under
``checkify.checkify(..., errors=checkify.user_checks)`` as
:func:`jax.experimental.checkify.debug_check` would be, and free under plain
``jit`` (no effect in the caller's program, so JAX's C++ dispatch is kept).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey


def eager(fn):
    """Runs a public-layer helper under ``jax.ensure_compile_time_eval``.

    Inside a caller's ``jit``, ``jnp`` ops on concrete inputs would otherwise be
    staged out as tracers, and their values could not be checked.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.ensure_compile_time_eval():
            return fn(*args, **kwargs)

    return wrapper


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds a value now (not a tracer inside jit/vmap/grad)."""
    return not isinstance(x, jax.core.Tracer)


def compute_dtype() -> np.dtype:
    """float32, or float64 when ``jax_enable_x64`` is on."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _fmt(value: Any) -> str:
    arr = np.asarray(value)
    if arr.ndim == 0:
        return repr(arr.item())
    return np.array2string(arr, threshold=8)


# ----------------------------------------------------------------------------- keys


def single_key(key: PRNGKey, fn: str) -> PRNGKey:
    """Returns a typed PRNG key of shape ``()``.

    Accepts ``jax.random.key(...)`` and legacy ``jax.random.PRNGKey(...)``
    (uint32 ``[2]``). A batch of keys is an error that points to ``jax.vmap``.
    """
    if isinstance(key, (int, np.integer)) or key is None:
        raise ValueError(
            f"{fn}: key must be a JAX PRNG key (jax.random.key(seed)), got {key!r}; "
            "jaxdp never takes an int seed"
        )
    if not hasattr(key, "dtype"):
        key = jnp.asarray(key)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(
                f"{fn}: key must be a single key of shape (), got a batch of keys of shape "
                f"{key.shape}; use jax.vmap over keys for batches"
            )
        return key
    if key.dtype == jnp.uint32 and key.ndim >= 1 and key.shape[-1] == 2:
        if key.shape != (2,):
            raise ValueError(
                f"{fn}: key must be a single key, got a batch of legacy keys of shape "
                f"{key.shape}; use jax.vmap over keys for batches"
            )
        return jax.random.wrap_key_data(key)
    raise ValueError(
        f"{fn}: key must be a JAX PRNG key (jax.random.key or jax.random.PRNGKey), "
        f"got dtype {key.dtype} and shape {key.shape}"
    )


# ----------------------------------------------------------------------------- arrays


def wide_host(x: Any, *, floats: bool = False) -> np.ndarray | None:
    """``x`` as a NumPy array when it is host data (a NumPy array, a Python number
    or a nested list of them) of 64-bit integers (or Python ints beyond them), or
    with ``floats`` of float64, and the compute dtype is float32
    (``jax_enable_x64`` off); else None.

    ``jnp.asarray`` would truncate such integers to int32, wrapping them modulo
    2**32 (2**31 + 10 becomes -2**31 + 10, a millisecond timestamp becomes noise),
    and raises ``OverflowError`` for a Python int beyond int32. Callers convert
    them exactly instead (:func:`score_array`, :func:`float_array`,
    :func:`jaxdp._additive.laplace`).
    """
    if isinstance(x, (jax.Array, jax.core.Tracer, str, bytes)) or x is None:
        return None
    if compute_dtype() == np.float64:
        return None
    try:
        host = np.asarray(x)
    except (TypeError, ValueError, OverflowError):
        return None
    if host.dtype.kind in "iu" and host.dtype.itemsize == 8:
        return host
    if floats and host.dtype == np.float64:
        return host
    if host.dtype == object and host.size and all(type(v) is int for v in host.ravel()):
        return host  # Python ints beyond 64 bits
    return None


def _wide_to_float(host: np.ndarray) -> np.ndarray:
    """64-bit integers rounded to the nearest float32 (through float64: exact
    below 2**53, so one rounding there)."""
    return host.astype(np.float64).astype(compute_dtype())


def _real_array(x: ArrayLike, fn: str, name: str) -> Array:
    """``x`` as a JAX array of a real (or bool) dtype; anything else raises.

    64-bit integers on the host with x64 off (:func:`wide_host`) are rounded to
    the nearest float32 rather than wrapped modulo 2**32."""
    if isinstance(x, (str, bytes)) or x is None:
        raise ValueError(f"{fn}: {name} must be a real array, got {x!r}")
    wide = wide_host(x)
    if wide is not None:
        x = _wide_to_float(wide)
    try:
        arr = jnp.asarray(x)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: {name} must be a real array, got {x!r}") from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating) or not (
        jnp.issubdtype(arr.dtype, jnp.number) or arr.dtype == jnp.bool_
    ):
        raise ValueError(f"{fn}: {name} must be real-valued, got dtype {arr.dtype}")
    return arr


@functools.partial(jax.jit, static_argnames=("allow_neg_inf", "rows_axis"))
def _value_flags(arr: Array, *, allow_neg_inf: bool, rows_axis: int | None) -> tuple:
    """(any NaN or +inf (or -inf unless ``allow_neg_inf``), any row along
    ``rows_axis`` that is all -inf): the concrete checks as one compiled pass,
    rather than an op-by-op dispatch and a full-size temporary per check."""
    bad = jnp.isnan(arr) | (arr == jnp.inf)
    if not allow_neg_inf:
        bad = bad | (arr == -jnp.inf)
    if rows_axis is None:
        return jnp.any(bad), jnp.bool_(False)
    return jnp.any(bad), jnp.any(jnp.all(arr == -jnp.inf, axis=rows_axis))


def _check_values(
    arr: Array, fn: str, name: str, allow_neg_inf: bool, rows_axis: int | None = None
) -> None:
    """Raises for a concrete NaN or +inf (or any infinity unless ``allow_neg_inf``),
    then, with ``rows_axis``, for a row of all ``-inf`` along it."""
    if not is_concrete(arr) or not arr.size or jnp.issubdtype(arr.dtype, jnp.integer):
        return  # integers are never NaN or infinite
    bad, empty_row = _value_flags(arr, allow_neg_inf=allow_neg_inf, rows_axis=rows_axis)
    if bool(bad):
        host = np.asarray(arr)
        flags = np.isnan(host) | (host == np.inf)
        if not allow_neg_inf:
            flags = flags | (host == -np.inf)
        first = tuple(int(i) for i in np.argwhere(flags)[0])
        allowed = "NaN or +inf" if allow_neg_inf else "NaN or infinite values"
        raise ValueError(
            f"{fn}: {name} must not contain {allowed}; found {_fmt(host[first])} at index {first}"
        )
    if bool(empty_row):
        _raise_all_neg_inf(fn)


def _raise_all_neg_inf(fn: str) -> None:
    raise ValueError(
        f"{fn}: every row of scores needs at least one finite score; "
        "a row is all -inf, so no outcome can be selected"
    )


@eager
def float_array(
    x: ArrayLike,
    fn: str,
    name: str,
    *,
    allow_neg_inf: bool = True,
) -> Array:
    """Converts to the compute float dtype; a concrete NaN or +inf raises.

    Integer, bool, float16 and bfloat16 inputs are upcast to float32 (float64
    under ``jax_enable_x64``). ``-inf`` is allowed when ``allow_neg_inf``.
    """
    arr = _real_array(x, fn, name).astype(compute_dtype())
    _check_values(arr, fn, name, allow_neg_inf)
    return arr


@eager
def data_array(x: ArrayLike, fn: str, name: str) -> Array:
    """Records (bids, data points) in the compute float dtype. A concrete NaN raises
    (it is no value at all); ``±inf`` is a value beyond every bound, and is
    clipped to the dtype's largest finite value: data never raise, and the
    mechanisms treat values outside their bounds alike."""
    arr = _real_array(x, fn, name).astype(compute_dtype())
    if is_concrete(arr) and arr.size and bool(jnp.any(jnp.isnan(arr))):
        first = tuple(int(i) for i in np.argwhere(np.isnan(np.asarray(arr)))[0])
        raise ValueError(f"{fn}: {name} must not contain NaN; found one at index {first}")
    big = jnp.finfo(arr.dtype).max
    return jnp.clip(arr, -big, big)


@eager
def score_array(x: ArrayLike, fn: str, axis: Any) -> Array:
    """Selection scores: integers *stay integer*, anything else is converted to the
    compute float dtype; a concrete NaN or +inf raises, then (when ``axis`` is a
    valid axis of the scores) a row of all ``-inf`` along ``axis``.

    Integers cannot be NaN or infinite, so they are not checked, and they are not
    converted here: the jitted layer shifts them by their row maximum in exact
    integer arithmetic (:func:`jaxdp._logits.from_scores`), so counts above 2**24
    (float32's integer limit) keep their exact differences to the row maximum (a
    gap of 1 between 16777217 and 16777216 stays 1 instead of rounding to 0), and
    XLA fuses that shift into the kernel's pass over the scores.
    """
    wide = wide_host(x)
    if wide is not None:
        x = _wide_scores(wide, axis)
    arr = _real_array(x, fn, "scores")
    if not jnp.issubdtype(arr.dtype, jnp.integer):
        arr = arr.astype(compute_dtype())
    try:
        rows_axis = operator.index(axis)
    except TypeError:
        rows_axis = None  # canonical_axis raises the error
    if rows_axis is not None and not -arr.ndim <= rows_axis < arr.ndim:
        rows_axis = None
    _check_values(arr, fn, "scores", True, rows_axis)
    return arr


def _wide_scores(host: np.ndarray, axis: Any) -> np.ndarray:
    """64-bit integer scores (x64 off) as their exact gaps to the row maximum along
    ``axis``, negated: int32 when every gap fits, else float32 rounded once (through
    float64, exact below 2**53). Every sampler's law depends on the scores only
    through these gaps, so this is the same law as the integer scores themselves,
    as the int32 path computes it (:func:`jaxdp._logits.difference`). An invalid
    ``axis`` or an empty row leaves the scores as float32 for the checks to refuse."""
    try:
        ax = operator.index(axis)
        top = np.max(host, axis=ax, keepdims=True)
    except (TypeError, ValueError, IndexError):
        return _wide_to_float(host)
    if host.dtype == object:  # Python ints: exact gaps in Python arithmetic
        gaps = top - host
    else:  # max - s is in [0, 2**64): exact in uint64's modular arithmetic.
        gaps = top.astype(np.uint64) - host.astype(np.uint64)
    if gaps.size == 0 or int(gaps.max()) <= np.iinfo(np.int32).max:
        return (-gaps.astype(np.int64)).astype(np.int32)
    return -gaps.astype(np.float64).astype(compute_dtype())


def canonical_axis(axis: int, ndim: int, fn: str) -> int:
    """Normalises ``axis`` against ``ndim``; raises for bad axes and 0-d scores."""
    if ndim == 0:
        raise ValueError(f"{fn}: scores must have at least one axis (the outcomes), got a scalar")
    try:
        if isinstance(axis, (bool, np.bool_)):
            raise TypeError("a bool is not an axis")
        axis = operator.index(axis)
    except TypeError as err:
        raise ValueError(f"{fn}: axis must be an int, got {axis!r}") from err
    if not -ndim <= axis < ndim:
        raise ValueError(f"{fn}: axis {axis} is out of range for scores with {ndim} dimensions")
    return axis % ndim


def nonempty_axis(n: int, fn: str, name: str = "scores") -> None:
    if n == 0:
        raise ValueError(f"{fn}: {name} has an empty outcome axis; there is nothing to select")


def draw_shape(
    shape: Sequence[int] | None, batch_shape: tuple[int, ...], fn: str, what: str = "scores"
) -> tuple:
    """Canonicalises ``shape`` with :func:`jax.random.categorical`'s semantics.

    ``None`` gives ``batch_shape``. Otherwise ``shape`` must be
    broadcast-compatible with ``batch_shape``, and broadcasting must not change
    it: its trailing dims cover the batch, leading dims are i.i.d. draws.
    """
    if shape is None:
        return tuple(batch_shape)
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        if isinstance(shape, (bool, np.bool_)) or any(
            isinstance(d, (bool, np.bool_)) for d in shape
        ):
            raise TypeError("bools are not dims")
        shape = tuple(operator.index(d) for d in shape)
    except TypeError as err:
        raise ValueError(f"{fn}: shape must be a sequence of ints, got {shape!r}") from err
    if any(d < 0 for d in shape):
        raise ValueError(f"{fn}: shape must have non-negative dims, got {shape}")
    try:
        broadcast = jnp.broadcast_shapes(shape, tuple(batch_shape))
    except ValueError:
        broadcast = None
    if broadcast != shape:
        raise ValueError(
            f"{fn}: shape {shape} is not broadcast-compatible with the batch shape "
            f"{tuple(batch_shape)} of the {what}"
            + (" (their shape without the sampled axis)" if what == "scores" else "")
            + "; shape must end with dims that the batch shape broadcasts to"
        )
    return shape


def static_int(value: Any, fn: str, name: str, *, minimum: int, maximum: int | None = None) -> int:
    """A static Python int >= ``minimum`` (and <= ``maximum``)."""
    if isinstance(value, bool):
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError as err:
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {value!r}") from err
    if value < minimum:
        raise ValueError(f"{fn}: {name} must be an int >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{fn}: {name} must be an int <= {maximum}, got {value}")
    return value


def choice(value: Any, options: Sequence[str], fn: str, name: str) -> str:
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{fn}: {name} must be one of {list(options)}, got {value!r}")
    return value


# ----------------------------------------------------------------------------- privacy


def _concrete_params(fn: str, ok, must: str, params: dict[str, Any]) -> None:
    """Raises for a concrete parameter whose elements fail ``ok``; tracers pass.

    ``ok`` is applied twice: to the value in float64 (what the caller wrote) and
    to the value rounded to the compute dtype (what the mechanism uses), so a
    value that is fine in float64 but ``0`` or ``inf`` in float32 (``1e-300``,
    ``1e39``) raises instead of silently turning every draw into ``-1``/NaN.
    Subnormal values count as 0 in the compute dtype (XLA may flush them).
    """
    dtype = compute_dtype()
    info = np.finfo(dtype)
    for name, value in params.items():
        if value is None:
            raise ValueError(f"{fn}: {name} is required, got None")
        if not is_concrete(value):
            continue
        if isinstance(value, (str, bytes)) or isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{fn}: {name} must be a real number, got {value!r}")
        if getattr(value, "dtype", None) is not None and np.dtype(value.dtype) == np.bool_:
            raise ValueError(f"{fn}: {name} must be real numbers, got a bool array {value!r}")
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{fn}: {name} must be a real number, got {value!r}") from err
        if arr.size == 0:
            raise ValueError(f"{fn}: {name} must not be empty, got {_fmt(arr)}")
        if not np.all(np.isfinite(arr) & ok(arr)):
            raise ValueError(f"{fn}: {name} must be {must}, got {_fmt(value)}")
        with np.errstate(over="ignore", under="ignore"):
            low = arr.astype(dtype)
        flushed = np.where(np.abs(low) < info.tiny, dtype.type(0), low)
        good = np.isfinite(low) & ok(flushed.astype(np.float64))
        if not np.all(good):
            first = tuple(int(i) for i in np.argwhere(~good)[0]) if arr.ndim else ()
            raise ValueError(
                f"{fn}: {name} must be {must} in {dtype.name}, the dtype it is computed in; "
                f"got {_fmt(arr[first])}, which is {_fmt(low[first])} in {dtype.name} "
                f"(representable normal range [{info.tiny:.3g}, {info.max:.3g}]); "
                "use jax.enable_x64() for values outside it"
            )


def positive(fn: str, **params: Any) -> None:
    """Raises for a concrete parameter that is not finite and > 0 (elementwise),
    in float64 and in the compute dtype (see :func:`_concrete_params`)."""
    _concrete_params(fn, lambda a: a > 0, "finite and > 0", params)


def unit_interval_open(fn: str, **params: Any) -> None:
    """Raises for a concrete parameter outside the open interval (0, 1), in float64
    and in the compute dtype."""
    _concrete_params(fn, lambda a: (a > 0) & (a < 1), "in the open interval (0, 1)", params)


def boolean(value: Any, fn: str, name: str) -> bool:
    """A static flag: Python ``bool`` or NumPy ``bool_`` (also a concrete 0-d bool
    array); returns a Python bool.

    Anything else raises :class:`ValueError`: a string such as ``"False"`` (from
    a config file) is truthy and would silently double the privacy loss of
    ``monotonic``; ints ``0``/``1`` are refused as well, so a flag that changes
    the privacy guarantee is always written as a boolean; a traced value cannot
    choose a static code path.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if (
        is_concrete(value)
        and hasattr(value, "dtype")
        and hasattr(value, "shape")
        and getattr(value, "shape", None) == ()
        and np.dtype(value.dtype) == np.bool_
    ):
        return bool(value)
    raise ValueError(f"{fn}: {name} must be a bool (True or False), got {value!r}")


def positive_ok(x: Array) -> Array:
    """Traced predicate: every element finite and > 0 (for floats: a normal number,
    since XLA may flush subnormals to 0)."""
    x = jnp.asarray(x)
    ok = jnp.isfinite(x) & (x > 0)
    if jnp.issubdtype(x.dtype, jnp.floating):
        ok = ok & (x >= jnp.finfo(x.dtype).tiny)
    return jnp.all(ok)


def debug_check_positive(fn: str, **params: Array) -> None:
    """A traced check (:func:`.debug_check`) that each parameter is finite and > 0."""
    for name, value in params.items():
        debug_check(positive_ok(value), f"{fn}: {name} must be finite and > 0, got {{}}", value)


def debug_check_scores(fn: str, scores: Array, name: str = "scores") -> None:
    """A traced check that the scores hold no NaN or +inf (integers cannot)."""
    if jnp.issubdtype(scores.dtype, jnp.integer):
        return
    debug_check(
        ~jnp.any(jnp.isnan(scores) | (scores == jnp.inf)),
        f"{fn}: {name} must not contain NaN or +inf",
    )


def debug_check_selectable(fn: str, row_max: Array) -> None:
    """A traced check that every row has a finite (selectable) score."""
    debug_check(
        jnp.all(row_max > -jnp.inf),
        f"{fn}: every row of scores needs at least one finite score; a row is all -inf",
    )


# ----------------------------------------------------------------------------- selection


@eager
def selection_args(
    fn: str,
    key: PRNGKey,
    scores: ArrayLike,
    epsilon: Any,
    sensitivity: Any,
    shape: Sequence[int] | None,
    axis: int,
    *,
    require_key: bool = True,
) -> tuple[PRNGKey | None, Array, Array, Array, tuple[int, ...]]:
    """Validates and canonicalises the arguments of a finite-range selection.

    Returns ``(key, scores, epsilon, sensitivity, shape)`` with the sampled axis
    moved last (integer scores stay integer, others are of the compute dtype:
    :func:`score_array`), epsilon and sensitivity as arrays of the compute dtype, and
    ``shape`` checked against the batch shape (the scores' batch shape broadcast
    with epsilon's and sensitivity's shapes).
    """
    key = single_key(key, fn) if require_key else None
    positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    scores = score_array(scores, fn, axis)
    axis = canonical_axis(axis, scores.ndim, fn)
    if axis != scores.ndim - 1:  # an identity moveaxis would still copy the scores
        scores = jnp.moveaxis(scores, axis, -1)
    nonempty_axis(scores.shape[-1], fn)
    dtype = compute_dtype()
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    try:
        batch = tuple(jnp.broadcast_shapes(scores.shape[:-1], epsilon.shape, sensitivity.shape))
    except ValueError as err:
        raise ValueError(
            f"{fn}: epsilon (shape {epsilon.shape}) and sensitivity (shape "
            f"{sensitivity.shape}) must broadcast with the batch shape {scores.shape[:-1]} "
            "of the scores"
        ) from err
    shape = draw_shape(shape, batch, fn)
    return key, scores, epsilon, sensitivity, shape
