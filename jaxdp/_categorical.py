"""Mechanisms on categorical data: randomized response and the private mode."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from ._debug_check import debug_check
from ._exponential import _exponential_impl
from ._typing import Array, ArrayLike, PRNGKey


@_checks.eager
def _categories(values: ArrayLike, fn: str, num_categories: int) -> Array:
    """int32 categories; concrete values must be integers in [0, num_categories)."""
    wide = _checks.wide_host(values)  # 64-bit ids: int32 would wrap them into range
    if wide is not None:
        values = np.clip(wide, -1, num_categories).astype(np.int32)
    try:
        arr = jnp.asarray(values)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{fn}: values must be an array of category ids, got {values!r}") from err
    if not (jnp.issubdtype(arr.dtype, jnp.integer) or arr.dtype == jnp.bool_):
        if not jnp.issubdtype(arr.dtype, jnp.floating):
            raise ValueError(f"{fn}: values must hold integer category ids, got dtype {arr.dtype}")
        if _checks.is_concrete(arr) and arr.size:
            host = np.asarray(arr, np.float64)
            if not np.all(np.isfinite(host) & (host == np.round(host))):
                raise ValueError(
                    f"{fn}: values must be integer category ids, got non-integer values "
                    f"{np.array2string(host[host != np.round(host)][:4])}"
                )
    if _checks.is_concrete(arr) and arr.size:
        host = wide if wide is not None else np.asarray(arr)
        bad = (host < 0) | (host >= num_categories)
        if np.any(bad):
            raise ValueError(
                f"{fn}: values must be categories in [0, num_categories={num_categories}), "
                f"got {host[bad].ravel()[:4].tolist()}"
            )
    return arr.astype(jnp.int32)


def randomized_response(
    key: PRNGKey,
    values: ArrayLike,
    *,
    epsilon: ArrayLike,
    num_categories: int = 2,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""k-ary randomized response on each value.

    .. math::

        \Pr[\text{out} = v] = \frac{e^\varepsilon}{e^\varepsilon + k - 1}, \qquad
        \Pr[\text{out} = c] = \frac{1}{e^\varepsilon + k - 1} \quad (c \ne v)

    **Privacy.** ε-*local* DP for each value: for any two inputs v, v' and any
    output c the probability ratio is at most e^ε (Warner 1965 for k = 2;
    Kairouz, Oh & Viswanath 2016 for k-ary). Here the neighbouring relation is
    *replacing* one person's value, and each element of ``values`` is one
    person's private report.

    **Finite precision.** The keep/change coin is ``bits < T`` on 32 uniform
    random bits with ``T`` = :func:`keep_threshold`, so P[keep] is the exact
    dyadic ``T / 2**32``, rounded *down* from e^ε/(e^ε + k - 1) (float32 error
    covered by a factor ``1 - 8u``, ``u = 2**-24``). The ratio that sets ε,
    P[keep] / P[a given other category] = (k - 1) P / (1 - P), is then at most
    e^ε exactly; the reverse ratio exceeds e^-ε by at most a factor
    ``1 + 10ku + k 2**-31``, which stays below e^ε except for ε < 6ku. The other
    category is ``jax.random.randint`` over k - 1 offsets, uniform up to a
    relative bias of at most ``k 2**-32``. So each report is (ε', 0)-LDP with
    ε' ≤ ε + 2k·2**-32 + max(0, 12ku - 2ε), δ' = 0, for every k < 2**31 (int32 ids).

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      values: ``[...]`` integer categories in ``[0, num_categories)`` (integral
        floats are accepted).
      epsilon: ε > 0; number or array broadcasting with ``values``; may be traced.
      num_categories: static int k >= 2.
      shape: static output shape, broadcast-compatible with ``values``.

    Returns:
      int32 array of ``shape``. Under tracing, out-of-range values or invalid ε give -1.

    Raises:
      ValueError: ε not finite and > 0; ``num_categories`` < 2; values that are
        not integer categories in range; bad ``shape`` or key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.randomized_response(jax.random.key(0), jnp.array([0, 1, 2]),
      ...                           epsilon=1.0, num_categories=3).dtype
      dtype('int32')

    References:
      S. L. Warner, `Randomized Response: A Survey Technique for Eliminating
      Evasive Answer Bias <https://doi.org/10.1080/01621459.1965.10480775>`_, JASA 1965.
      P. Kairouz, S. Oh and P. Viswanath, `Extremal Mechanisms for Local
      Differential Privacy <https://jmlr.org/papers/v17/15-135.html>`_, JMLR 2016.
    """
    fn = "randomized_response"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, epsilon=epsilon)
    k = _checks.static_int(
        num_categories, fn, "num_categories", minimum=2, maximum=np.iinfo(np.int32).max
    )
    values = _categories(values, fn, k)
    epsilon = jnp.asarray(epsilon, _checks.compute_dtype())
    try:
        batch = tuple(jnp.broadcast_shapes(values.shape, epsilon.shape))
    except ValueError as err:
        raise ValueError(
            f"{fn}: epsilon of shape {epsilon.shape} must broadcast with values of shape "
            f"{values.shape}"
        ) from err
    shape = _checks.draw_shape(shape, batch, fn, "values")
    return _rr_impl(key, values, epsilon, k=k, shape=shape)


def keep_threshold(epsilon: Array, k: int) -> Array:
    """uint32 T with P[keep] = T / 2**32 <= e^eps / (e^eps + k - 1), exactly.

    P[keep] = 1 / (1 + m), m = (k - 1) e^-eps (never overflows), is rounded
    *down* to a multiple of 2**-32: the float32 value carries at most 4 roundings
    (exp, *, +, /), each of relative size u = 2**-24, so ``keep * (1 - 8u)`` is
    below the exact value, and ``floor`` of its (exact) product with 2**32 only
    lowers it. Drawn as ``bits < T`` from 32 uniform random bits, the implemented
    P[keep] never exceeds the exact one ("Finite precision" in
    :func:`randomized_response`).
    """
    m = (k - 1) * jnp.exp(-epsilon)
    keep = 1 / (1 + m)
    u = jnp.finfo(keep.dtype).eps / 2
    keep_down = keep * (1 - 8 * u)
    below_2_32 = float(np.nextafter(np.float32(2.0**32), np.float32(0)))
    return jnp.minimum(jnp.floor(keep_down * 2.0**32), below_2_32).astype(jnp.uint32)


@partial(jax.jit, static_argnames=("k", "shape"))
def _rr_impl(key, values, epsilon, *, k, shape):
    fn = "randomized_response"
    _checks.debug_check_positive(fn, epsilon=epsilon)
    in_range = (values >= 0) & (values < k)
    debug_check(jnp.all(in_range), f"{fn}: values must be categories in [0, {k})")
    threshold = jnp.broadcast_to(keep_threshold(epsilon, k), shape)
    key_flip, key_other = jax.random.split(key)
    change = jax.random.bits(key_flip, shape, jnp.uint32) >= threshold
    offset = jax.random.randint(key_other, shape, 1, k, dtype=jnp.int32)
    v = jnp.broadcast_to(values, shape)
    out = jnp.where(change, (v + offset) % k, v)
    ok = jnp.broadcast_to(in_range, shape) & jnp.broadcast_to(_checks.positive_ok(epsilon), shape)
    return jnp.where(ok, out, -1).astype(jnp.int32)


def private_mode(
    key: PRNGKey,
    values: ArrayLike,
    *,
    epsilon: ArrayLike,
    num_categories: int,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""The most common category, chosen by the exponential mechanism on counts.

    .. math::

        \Pr[c] \propto \exp(\varepsilon \cdot \#\{i : x_i = c\})

    **Privacy.** ε-DP under add/remove-one neighbours: adding or removing one
    record changes exactly one count by 1, so the counts have sensitivity Δ = 1
    and are monotonic (all move in the same direction), and the exponential
    mechanism with factor ε/Δ is ε-DP (McSherry & Talwar 2007; Dwork & Roth 2014,
    §3.4).

    **Finite precision.** The counts are integers, so their gaps to the row
    maximum are exact (below 2**24 in float32; larger gaps have probability
    below e^(-ε 2**24)); the logits ``ε·gap`` carry one rounding and the draw is
    the categorical kernel's (``SECURITY.md``, "The categorical kernel"): each
    draw is (ε + ε_c', δ_c')-DP with the kernel's (ε_c', δ_c') for n =
    ``num_categories`` outcomes.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      values: ``[..., m]`` integer categories in ``[0, num_categories)``: each row
        of the last axis is one dataset of m records (m may be 0).
      epsilon: ε > 0; number or array broadcasting with the batch shape
        ``values.shape[:-1]``; may be traced.
      num_categories: static int >= 2, the number of candidate categories.
      shape: static draw shape with :func:`jax.random.categorical` semantics over
        the batch shape.

    Returns:
      int32 array of ``shape``: category ids; an empty batch (``values`` of shape
      ``(0, m)``) gives an empty result, as :func:`jax.random.categorical` does.
      Under tracing, invalid ε, or a row holding a value outside
      ``[0, num_categories)``, gives -1 and ``checkify`` reports it.

    Raises:
      ValueError: ε not finite and > 0; ``num_categories`` < 2; values out of
        range; scalar ``values``; bad ``shape`` or key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> votes = jnp.array([0, 2, 2, 1, 2])
      >>> jaxdp.private_mode(jax.random.key(0), votes, epsilon=1.0,
      ...                    num_categories=3, shape=(1000,)).shape
      (1000,)

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "private_mode"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, epsilon=epsilon)
    k = _checks.static_int(
        num_categories, fn, "num_categories", minimum=2, maximum=np.iinfo(np.int32).max
    )
    values = _categories(values, fn, k)
    if values.ndim == 0:
        raise ValueError(f"{fn}: values must have a records axis, got a scalar")
    counts, in_range = _counts(values, k)
    _, counts, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, counts, epsilon, 1.0, shape, -1
    )
    if math.prod(shape) == 0:
        return jnp.zeros(shape, jnp.int32)  # as jax.random.categorical on an empty batch
    return _mode_impl(key, counts, in_range, epsilon, sensitivity, shape=shape)


@partial(jax.jit, static_argnames=("shape",))
def _mode_impl(key, counts, in_range, epsilon, sensitivity, *, shape):
    debug_check(
        jnp.all(in_range),
        f"private_mode: values must be categories in [0, num_categories={counts.shape[-1]})",
    )
    idx = _exponential_impl(
        key, counts, epsilon, sensitivity, monotonic=True, shape=shape, method="auto"
    )
    return jnp.where(jnp.broadcast_to(in_range, shape), idx, -1)


@partial(jax.jit, static_argnames=("k",))
def _counts(values: Array, k: int) -> tuple[Array, Array]:
    """Per-row category counts ``[..., k]`` and a per-row flag that every value is
    in ``[0, k)`` (values outside it are not counted; the flag marks their row)."""
    return _row_counts(k)(values)


@functools.cache
def _row_counts(k: int) -> Callable[[Array], tuple[Array, Array]]:
    """:func:`_counts` for ``k`` categories as a ``custom_vmap`` function whose rule
    counts a ``vmap``'s members as more rows of one call: a batched scatter fails
    checkify's index check inside JAX (an ``IndexError``), so ``private_mode``
    under ``vmap`` and ``checkify`` would crash."""

    @jax.custom_batching.custom_vmap
    def counts(values: Array) -> tuple[Array, Array]:
        rows = math.prod(values.shape[:-1])
        flat = values.reshape((rows, values.shape[-1]))  # n may be 0
        ok = (flat >= 0) & (flat < k)
        row = jax.lax.broadcasted_iota(jnp.int32, flat.shape, 0)
        col = jnp.where(ok, flat, 0).astype(jnp.int32)
        table = jnp.zeros((rows, k), jnp.int32)
        table = table.at[row, col].add(ok.astype(jnp.int32), mode="promise_in_bounds")
        in_range = jnp.all(ok, axis=-1).reshape(values.shape[:-1])
        return table.reshape(values.shape[:-1] + (k,)), in_range  # exact gaps above 2**24

    @counts.def_vmap
    def _rule(axis_size: int, in_batched: list[bool], values: Array):
        del axis_size  # the batch axis leads `values`: more rows
        (batched,) = in_batched
        return counts(values), (batched, batched)

    return counts
