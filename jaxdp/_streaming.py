"""The exponential mechanism over ranges too large to hold in memory.

The candidates ``0 .. num_candidates - 1`` are scored chunk by chunk by a
user-supplied ``score_fn`` inside ``lax.fori_loop``; only running quantities
live across chunks. One sampler, in two passes, whatever ``method`` says:

1. the exact row maximum of the scores (a running max is exact);
2. the exponential race of :mod:`jaxdp._noisy_kernels`: each chunk's rates
   ``exp(c (max - s))`` (exact two-float logits, clipped 80 below the maximum)
   times fresh Exp(1) noise from 64 random bits for every draw (keys
   ``fold_in(key, chunk)``), and a running argmin per draw.

Every candidate's product is computed once, against the same global maximum, so
the running argmin is the exact argmin of one set of float values, and the
finite-precision guarantee of :func:`jaxdp.exponential` with ``"gumbel"``
holds (SECURITY.md, "Finite precision: noise-based paths"). The earlier
one-pass Gumbel (rescaling stored maxima as the running maximum grew) and the
two-pass inverse CDF (float32 prefix sums across chunks) were not private in
float32: the latter misplaced mass among small outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _logits, _noisy_kernels, _random, _rows, _threefry, _tracing
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

_METHODS = ("auto", "gumbel", "inverse_cdf")

#: Largest supported number of candidates: indices are int32.
MAX_CANDIDATES = int(np.iinfo(np.int32).max)


def exponential_streaming(
    key: PRNGKey,
    score_fn: Callable[..., ArrayLike],
    num_candidates: int,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    chunk_size: int,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    data: Any = None,
    method: str = "auto",
) -> Array:
    r"""Draws from the exponential mechanism over a range scored chunk by chunk.

    The law is that of :func:`jaxdp.exponential` on the materialised scores
    :math:`s_r` = ``score_fn(arange(num_candidates))``:

    .. math::

        \Pr[r] = \frac{\exp(\varepsilon\, s_r / (2\Delta))}
                      {\sum_{r' < N} \exp(\varepsilon\, s_{r'} / (2\Delta))},
        \qquad r \in \{0, \dots, N - 1\},

    (:math:`\varepsilon s_r / \Delta` in the exponent when ``monotonic``), but the
    scores are never held at once: ``score_fn`` is called on ``chunk_size``
    indices at a time inside one ``lax.fori_loop`` (one compiled body, no Python
    loop over chunks). Peak memory is O(``chunk_size`` × draws); it does not
    grow with ``num_candidates``. ``score_fn`` is called twice per chunk (a pass
    for the maximum, then the race).

    **Privacy.** As :func:`jaxdp.exponential`: if every score changes by at most
    ``sensitivity`` = Δ between neighbouring datasets (add or remove one record),
    each draw is ε-differentially private (McSherry & Talwar 2007, Thm 6; Dwork
    & Roth 2014, Thm 3.10); with ``monotonic=True`` (all scores move in the same
    direction) the factor ε/Δ keeps ε-DP. ``num_candidates``, ``chunk_size`` and
    ``score_fn`` itself must not depend on the data; the data enter only through
    the scores. Each draw of a batch is a separate ε-DP release.

    Args:
      key: a PRNG key, ``jax.random.key(...)`` or legacy ``jax.random.PRNGKey(...)``.
        One key per call; use ``jax.vmap`` for batches of keys.
      score_fn: a JAX-traceable function, static (it is a ``jit`` static
        argument: define it once, not as a fresh ``lambda`` per call, or every
        call recompiles). Called as ``score_fn(indices)``, or
        ``score_fn(indices, data)`` when ``data`` is given, with int32
        ``indices`` of shape ``[chunk]`` (``chunk = min(chunk_size,
        num_candidates)``) that always lie in ``[0, num_candidates)``; in the last
        chunk the positions past the end repeat the last index and are masked
        out. Returns real scores ``[..., chunk]`` (leading dims are a batch of
        score rows, as in :func:`jaxdp.exponential`). ``-inf`` marks a candidate
        that is never selected.
      num_candidates: static int N, 1 <= N <= 2**31 - 1.
      epsilon: privacy parameter ε > 0. Python number or array broadcasting with
        the batch shape; may be traced (``vmap`` over an ε grid compiles once).
      sensitivity: Δ > 0, the largest change of any score between neighbours.
        Same rules as ``epsilon``.
      chunk_size: static int >= 1, candidates scored per step. Larger chunks
        amortise the loop; memory grows as ``chunk_size`` × draws.
      monotonic: static bool; see **Privacy**.
      shape: static draw shape, as in :func:`jax.random.categorical`: it must end
        with dims that the batch shape (of ``score_fn``'s rows, ε and Δ)
        broadcasts to; leading dims are i.i.d. draws. ``None``: one draw per row.
      data: optional pytree of arrays passed to ``score_fn`` as its second
        argument. It is a traced argument, so one compiled function serves every
        dataset of the same shapes and dtypes.
      method: static, ``"auto"``, ``"gumbel"`` or ``"inverse_cdf"``, kept for
        compatibility: all three run the same sound two-pass race (one Exp(1)
        variate per candidate per draw, O(N × draws) noise). The former
        ``"inverse_cdf"`` pass (O(N log draws)) summed float32 masses across
        chunks and was not private in float32.

    Returns:
      int32 array of ``shape`` with indices in ``[0, num_candidates)``. Under
      tracing, a row with no valid draw (``score_fn`` returned NaN or +inf, all
      scores ``-inf``, or ε, Δ not finite and > 0) returns -1 there; ``checkify``
      reports why.

    Raises:
      ValueError: for a non-callable ``score_fn`` or one whose output is not
        ``[..., chunk]`` real scores; ``num_candidates`` or ``chunk_size`` not an
        int >= 1 (or ``num_candidates`` >= 2**31); a concrete ε or Δ that is not
        finite and > 0; a bad ``shape`` or ``method``; a batched key. When called
        outside ``jit``/``vmap``, also when ``score_fn`` returned NaN or +inf or a
        row of scores is all ``-inf`` (known only after the pass).

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> def score_fn(i, data):        # utility of threshold i: a concave profile
      ...     return -jnp.abs(i.astype(jnp.float32) - data)
      >>> draws = jaxdp.exponential_streaming(
      ...     jax.random.key(0), score_fn, 10**6, epsilon=1.0, sensitivity=1.0,
      ...     chunk_size=2**16, shape=(100,), data=jnp.float32(4e5))
      >>> draws.shape, draws.dtype
      ((100,), dtype('int32'))

    **Finite precision.** As :func:`jaxdp.exponential` with ``method="gumbel"``:
    the race ``argmin E_i exp(c (max s - s_i))`` with Exp(1) noise from 64 random
    bits, exact two-float logits against the exact global maximum, clipped 80
    below it (exactly as private), the scale rounded down. In float32 each draw
    is (ε', δ')-DP with ε' = ε + 40·2⁻²⁴ = ε + 2.4e-6 and
    δ' = N·(1 + e^ε')·2⁻⁶⁵; at ε = 1, δ' = 1.0e-16 (N = 10³), 1.0e-13
    (N = 10⁶), 2.2e-10 (N = 2³¹ - 1). No candidate is impossible unless its
    probability is below 1.7e-21. Derivation: SECURITY.md, "Finite precision:
    noise-based paths".

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.4.
      E. J. Gumbel, *Statistical Theory of Extreme Values and Some Practical
      Applications*, 1954 (the Gumbel-max trick).
    """
    fn = "exponential_streaming"
    key = _checks.single_key(key, fn)
    if not callable(score_fn):
        raise ValueError(f"{fn}: score_fn must be a callable score_fn(indices), got {score_fn!r}")
    num_candidates = _checks.static_int(num_candidates, fn, "num_candidates", minimum=1)
    if num_candidates > MAX_CANDIDATES:
        raise ValueError(
            f"{fn}: num_candidates must be <= 2**31 - 1 (indices are int32), got {num_candidates}"
        )
    chunk_size = _checks.static_int(chunk_size, fn, "chunk_size", minimum=1)
    _checks.positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    method = _checks.choice(method, _METHODS, fn, "method")
    chunk = min(chunk_size, num_candidates)
    has_data = data is not None
    score_batch = _score_batch(score_fn, chunk, data, has_data, fn)
    dtype = _checks.compute_dtype()
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    try:
        batch = _rows.broadcast_batch(score_batch, epsilon.shape, sensitivity.shape)
    except ValueError as err:
        raise ValueError(
            f"{fn}: epsilon (shape {epsilon.shape}) and sensitivity (shape "
            f"{sensitivity.shape}) must broadcast with the batch shape {score_batch} of "
            "score_fn's scores"
        ) from err
    shape = _checks.draw_shape(shape, batch, fn)
    if math.prod(shape) == 0:
        return jnp.zeros(shape, jnp.int32)
    idx, nonfinite, empty = _streaming_impl(
        key,
        data,
        epsilon,
        sensitivity,
        score_fn=score_fn,
        num_candidates=num_candidates,
        chunk=chunk,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
        method=method,
        has_data=has_data,
    )
    if _checks.is_concrete(nonfinite):
        if bool(jnp.any(nonfinite)):
            raise ValueError(f"{fn}: score_fn returned NaN or +inf scores")
        if bool(jnp.any(empty)):
            raise ValueError(
                f"{fn}: every row of scores needs at least one finite score; score_fn "
                "returned -inf for every candidate of a row, so nothing can be selected"
            )
    return idx


def _leaf_struct(x: Any) -> Any:
    return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))


def _score_batch(score_fn: Callable, chunk: int, data: Any, has_data: bool, fn: str) -> tuple:
    """The batch shape of ``score_fn``'s scores, checked by abstract evaluation."""
    indices = jax.ShapeDtypeStruct((chunk,), jnp.int32)
    try:
        if has_data:
            out = jax.eval_shape(score_fn, indices, jax.tree.map(_leaf_struct, data))
        else:
            out = jax.eval_shape(score_fn, indices)
    except TypeError as err:
        call = "score_fn(indices, data)" if has_data else "score_fn(indices)"
        raise ValueError(
            f"{fn}: calling {call} on int32 indices of shape ({chunk},) failed: {err}"
        ) from err
    if not hasattr(out, "shape") or not hasattr(out, "dtype"):
        raise ValueError(f"{fn}: score_fn must return one array of scores, got {out!r}")
    dtype = out.dtype
    if not (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)) and (
        dtype != jnp.bool_
    ):
        raise ValueError(f"{fn}: score_fn must return real scores, got dtype {dtype}")
    if len(out.shape) == 0 or out.shape[-1] != chunk:
        raise ValueError(
            f"{fn}: score_fn(indices) must return scores of shape [..., {chunk}] for "
            f"indices of shape ({chunk},), got shape {tuple(out.shape)}"
        )
    return tuple(out.shape[:-1])


@partial(
    jax.jit,
    static_argnames=(
        "score_fn",
        "num_candidates",
        "chunk",
        "monotonic",
        "shape",
        "method",
        "has_data",
    ),
)
def _streaming_impl(
    key,
    data,
    epsilon,
    sensitivity,
    *,
    score_fn,
    num_candidates,
    chunk,
    monotonic,
    shape,
    method,
    has_data,
):
    fn = "exponential_streaming"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    dtype = _checks.compute_dtype()
    n = num_candidates
    num_chunks = -(-n // chunk)
    indices = jax.ShapeDtypeStruct((chunk,), jnp.int32)
    if has_data:
        score_batch = jax.eval_shape(score_fn, indices, data).shape[:-1]
    else:
        score_batch = jax.eval_shape(score_fn, indices).shape[:-1]
    batch = _rows.broadcast_batch(score_batch, epsilon.shape, sensitivity.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    num_rows = math.prod(tail)

    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, dtype)
    c_rows = _rows.flatten_batch(_noisy_kernels.round_down_scale(scale), tail)[:, None]
    params_ok = _rows.flatten_batch(_logits.params_valid(batch, epsilon, sensitivity), tail)
    offsets = jnp.arange(chunk, dtype=jnp.int32)

    def chunk_scores(c):
        """Indices ``(chunk,)``, masked scores ``(rows, chunk)``, NaN/+inf flags ``(rows,)``."""
        start = c * chunk  # <= (num_chunks - 1) * chunk < n <= 2**31 - 1: no overflow
        remaining = n - start
        live = offsets < remaining
        idx = start + jnp.minimum(offsets, remaining - 1)
        s = score_fn(idx, data) if has_data else score_fn(idx)
        s = jnp.asarray(s).astype(dtype)
        s = jnp.broadcast_to(s, tail + (chunk,)).reshape((num_rows, chunk))
        bad_value = jnp.isnan(s) | (s == jnp.inf)
        bad = jnp.any(bad_value & live[None, :], axis=-1)
        s = jnp.where(live[None, :] & ~bad_value, s, -jnp.inf)
        return idx, s, bad

    neg_inf_rows = jnp.full((num_rows,), -jnp.inf, dtype)
    no_bad = jnp.zeros((num_rows,), bool)

    del method  # every method is the two-pass race (see the module docstring)

    # Pass 1: the exact row maximum (and the NaN/+inf flags).
    def max_body(c, carry):
        row_max, bad = carry
        _, s, b = chunk_scores(c)
        return jnp.maximum(row_max, jnp.max(s, axis=-1)), bad | b

    init = _tracing.carry_for(lambda carry: max_body(0, carry), (neg_inf_rows, no_bad))
    row_max, bad = jax.lax.fori_loop(0, num_chunks, max_body, init)
    m = row_max[:, None]
    key = _threefry.fast_key(key)

    # Pass 2: the exponential race argmin E * exp(-logit), rates relative to the
    # global maximum, so every candidate's product is computed once, the same way.
    def body(c, carry):
        best, arg = carry
        idx, s, _ = chunk_scores(c)
        rates = _noisy_kernels.race_rates(s, m, c_rows)
        noise = _random.race_exponential(
            jax.random.fold_in(key, c), (num_lead, num_rows, chunk), dtype
        )
        qmin, pos = _noisy_kernels._first_argmin(noise * rates[None])
        better = qmin < best  # earlier chunks win ties: the lowest index
        return jnp.where(better, qmin, best), jnp.where(better, idx[pos], arg)

    init = (
        jnp.full((num_lead, num_rows), jnp.inf, dtype),
        jnp.zeros((num_lead, num_rows), jnp.int32),
    )
    init = _tracing.carry_for(lambda carry: body(0, carry), init)  # shard_map
    _, out = jax.lax.fori_loop(0, num_chunks, body, init)

    valid = params_ok & ~bad & (row_max > -jnp.inf)
    _checkify_scores(fn, bad, row_max)
    out = jnp.where(valid[None, :], out, -1)
    return out.reshape(shape), bad, row_max == -jnp.inf


def _checkify_scores(fn: str, bad: Array, row_max: Array) -> None:
    debug_check(~jnp.any(bad), f"{fn}: score_fn returned NaN or +inf scores")
    _checks.debug_check_selectable(fn, row_max)
