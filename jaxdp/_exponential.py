"""The exponential mechanism over a finite range (McSherry & Talwar 2007)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

from . import _checks, _kernels, _noisy_kernels
from ._typing import Array, ArrayLike, PRNGKey

_METHODS = ("auto", "gumbel", "inverse_cdf")


def exponential(
    key: PRNGKey,
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
    method: str = "auto",
) -> Array:
    r"""Draws outcomes with the exponential mechanism.

    .. math::

        \Pr[r] = \frac{\exp(\varepsilon\, s_r / (2\Delta))}
                      {\sum_{r'} \exp(\varepsilon\, s_{r'} / (2\Delta))}

    (:math:`\varepsilon s_r / \Delta` in the exponent when ``monotonic``).

    **Privacy.** If every score changes by at most ``sensitivity`` = Δ between
    neighbouring datasets (add or remove one record), each draw is
    ε-differentially private (McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014,
    Thm 3.10). When ``monotonic=True`` the caller promises that all scores move in
    the same direction between neighbours (e.g. counts); then the factor
    ε / Δ keeps ε-DP (Dwork & Roth 2014, remark after Thm 3.10). Each draw of a
    batch (``shape``) is a separate ε-DP release: releasing S draws of one
    dataset costs S·ε under basic composition.

    Args:
      key: a PRNG key, ``jax.random.key(...)`` or legacy ``jax.random.PRNGKey(...)``.
        One key per call; use ``jax.vmap`` for batches of keys.
      scores: ``[..., n, ...]`` real array (any dtype; computed in float32, or
        float64 under ``jax_enable_x64``). ``-inf`` marks an outcome that is never
        selected. Traced or concrete.
      epsilon: privacy parameter ε > 0. Python number or array broadcasting with
        the batch shape (scores' shape without ``axis``); may be traced, so a
        study can ``vmap`` over an ε grid without recompiling.
      sensitivity: Δ > 0, the largest change of any score between neighbours.
        Same rules as ``epsilon``.
      monotonic: static bool; see **Privacy**.
      shape: static draw shape, as in :func:`jax.random.categorical`: it must end
        with dims the batch shape broadcasts to; leading dims are i.i.d. draws.
        ``None`` gives one draw per score row.
      axis: static int, the axis of outcomes.
      method: static, ``"gumbel"`` (argmax of logits plus Gumbel noise, one
        variate per candidate per draw, chunked to cache size),
        ``"inverse_cdf"`` (an ``exp`` and prefix sum once per row, then one
        uniform and an O(log n) search per draw), or ``"auto"`` (the faster one
        for the static sizes, as measured by ``python -m benchmarks``).

    Returns:
      int32 array of ``shape`` with indices into ``axis``. Under tracing, a row
      with no valid draw (NaN or +inf scores, all ``-inf``, or ε, Δ not finite
      and > 0) returns -1 there; ``checkify`` reports why.

    Raises:
      ValueError: for a concrete ε or Δ that is not finite and > 0; NaN or +inf
        scores; a row of all ``-inf``; an empty outcome axis; a bad ``axis``,
        ``shape`` or ``method``; a batched key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> draws = jaxdp.exponential(jax.random.key(0), jnp.arange(1000.0),
      ...                           epsilon=1.0, sensitivity=1.0, shape=(10**6,))
      >>> draws.shape, draws.dtype
      ((1000000,), dtype('int32'))

    .. note::
      Float32 resolution. ``"gumbel"`` uses noise built from all 32 random bits
      (``jaxdp._random``): Gumbel variates reach 22.9, so selection probabilities
      down to about 1e-10 of the largest are resolved, and a logit gap above
      about 25.7 can never be crossed. ``"inverse_cdf"`` is limited by its float32
      prefix sum: an outcome whose probability is below about 1e-7 of the row
      total (one ulp of the running sum) is mis-weighted. Under
      ``jax.config.update("jax_enable_x64", True)`` (or the ``jax.enable_x64()``
      context) scores, logits, sums and uniforms are float64 and the limits drop
      to about 1e-19 and 1e-16. Scores are shifted by their row maximum first
      (integers exactly), so offsets such as 1e30 or 2**24 do not move the law.

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.4.
    """
    fn = "exponential"
    key, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, scores, epsilon, sensitivity, shape, axis
    )
    method = _checks.choice(method, _METHODS, fn, "method")
    return _exponential_impl(
        key,
        scores,
        epsilon,
        sensitivity,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
        method=method,
    )


@partial(jax.jit, static_argnames=("monotonic", "shape", "method"))
def _exponential_impl(key, scores, epsilon, sensitivity, *, monotonic, shape, method):
    fn = "exponential"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    _checks.debug_check_selectable(fn, jnp.max(scores, axis=-1))
    scale = _kernels.scale_factor(epsilon, sensitivity, monotonic, scores.dtype)
    logits = _kernels.to_logits(scores, scale)
    if method == "auto":
        num_lead, tail = _kernels.split_shape(shape, logits.shape[:-1])
        method = _kernels.choose_method(num_lead, logits.shape[-1], max(1, len(tail)))
    if method == "gumbel":
        valid = _kernels.row_valid(scores, epsilon, sensitivity)
        idx = _noisy_kernels.noisy_argmax(key, logits, shape, "gumbel", scores=scores, scale=scale)
    else:
        # The row check comes from the row totals: a separate row maximum
        # would be a second pass over the scores.
        idx, rows_ok = _kernels.inverse_cdf(key, logits, shape, scores, scale)
        valid = rows_ok & _kernels.params_valid(rows_ok.shape, epsilon, sensitivity)
    return jnp.where(jnp.broadcast_to(valid, shape), idx, -1)


def exponential_log_probs(
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    axis: int = -1,
) -> Array:
    r"""The exact log-probabilities of :func:`exponential`.

    .. math::

        \log \Pr[r] = \frac{\varepsilon s_r}{2\Delta}
            - \operatorname{logsumexp}_{r'} \frac{\varepsilon s_{r'}}{2\Delta}

    **Privacy.** This is a deterministic function of the scores, not a release:
    it is *not* differentially private. It exists to audit and study the
    mechanism (for neighbouring scores the log-ratio is at most ε, McSherry &
    Talwar 2007, Thm 6).

    Args:
      scores: ``[..., n, ...]`` real array; ``-inf`` gives log-probability ``-inf``.
      epsilon: ε > 0, number or array broadcasting with the batch shape.
      sensitivity: Δ > 0, same rules.
      monotonic: static bool, use ε / Δ instead of ε / (2Δ).
      axis: static int, the axis of outcomes.

    Returns:
      Array of the compute dtype, the scores' shape broadcast with ε and Δ, with
      log-probabilities along ``axis`` (normalised with log-sum-exp). Under
      tracing, invalid rows are NaN.

    Raises:
      ValueError: as :func:`exponential`.

    Examples:
      >>> import jax.numpy as jnp, jaxdp
      >>> lp = jaxdp.exponential_log_probs(jnp.array([0.0, 0.0]), epsilon=1.0,
      ...                                  sensitivity=1.0)
      >>> jnp.exp(lp).tolist()
      [0.5, 0.5]

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_log_probs"
    positive_axis = _checks.canonical_axis(axis, jnp.ndim(scores), fn)
    _, scores, epsilon, sensitivity, _ = _checks.selection_args(
        fn, None, scores, epsilon, sensitivity, None, positive_axis, require_key=False
    )
    out = _log_probs_impl(
        scores, epsilon, sensitivity, monotonic=_checks.boolean(monotonic, fn, "monotonic")
    )
    return jnp.moveaxis(out, -1, positive_axis)


@partial(jax.jit, static_argnames=("monotonic",))
def _log_probs_impl(scores, epsilon, sensitivity, *, monotonic):
    fn = "exponential_log_probs"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    valid = _kernels.row_valid(scores, epsilon, sensitivity)
    scale = _kernels.scale_factor(epsilon, sensitivity, monotonic, scores.dtype)
    logits = _kernels.to_logits(scores, scale)
    out = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    return jnp.where(valid[..., None], out, jnp.nan)
