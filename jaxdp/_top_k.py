"""One-shot private top-k selection."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

from . import _checks, _logits, _noisy_kernels
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey


def top_k(
    key: PRNGKey,
    scores: ArrayLike,
    k: int,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
) -> Array:
    r"""Selects k distinct outcomes, in order, with the law of one-shot Gumbel top-k.

    The law of adding i.i.d. Gumbel noise of scale :math:`2k\Delta/\varepsilon` to
    every score and returning the indices of the k largest, largest first, which
    is equal in law to peeling: k rounds of :func:`exponential`, each at ε/k on
    the outcomes not yet chosen (Durfee & Rogers 2019, Lemma 4.2). It is drawn
    by peeling (see **Finite precision**).

    **Privacy.** ε-DP in total: each peeling round is (ε/k)-DP (McSherry &
    Talwar 2007) and the k rounds compose to ε under basic composition (Dwork &
    Roth 2014, Thm 3.16). With ``monotonic=True`` the per-round factor is
    ε/(kΔ).

    **Finite precision.** Drawn by peeling: k rounds of the exponential race
    ``argmin E_i exp(c (m - s_i))`` at c = ε/(2kΔ), each over the outcomes not
    yet chosen with their own maximum m and fresh Exp(1) noise from 64 random
    bits (the same law as one-shot Gumbel top-k; each round's logits are exact
    two-float pairs clipped 80 below m, which is exactly as private). In float32
    the k-tuple is (ε', δ')-DP with ε' = ε + 40·k·2⁻²⁴ (ε + 2.4e-6·k) and
    δ' = k·n·(1 + e^(ε/k + 2.4e-6))·2⁻⁶⁵; at ε/k = 1, δ'/k = 1.0e-16
    (n = 10³), 1.0e-13 (n = 10⁶), 2.2e-10 (n = 2³¹). Derivation: SECURITY.md,
    "Finite precision: noise-based paths". Cost: k times the noise of one round.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      scores: ``[..., n, ...]`` real array; ``-inf`` never selected.
      k: static int, 1 <= k <= n.
      epsilon: the *total* ε > 0; number or array broadcasting with the batch shape.
      sensitivity: Δ > 0, same rules.
      monotonic: static bool.
      shape: static draw shape with :func:`jax.random.categorical` semantics.
      axis: static int, the axis of outcomes.

    Returns:
      int32 array of ``shape + (k,)``: distinct indices in selection order. Under
      tracing, invalid rows give -1, and so do the positions past the number of
      finite scores of a row.

    Raises:
      ValueError: bad ε, Δ, scores, ``shape``, ``axis`` or key; k not an int in
        [1, n]; a concrete row with fewer than k finite scores.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.top_k(jax.random.key(0), jnp.arange(10.0), 3, epsilon=1.0,
      ...             sensitivity=1.0, shape=(100,)).shape
      (100, 3)

    References:
      D. Durfee and R. Rogers, `Practical Differentially Private Top-k Selection
      with Pay-what-you-get Composition <https://arxiv.org/abs/1905.04273>`_,
      NeurIPS 2019.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "top_k"
    key, scores, epsilon, sensitivity, shape, k = top_k_args(
        fn, key, scores, k, epsilon, sensitivity, shape, axis
    )
    return _top_k_impl(
        key,
        scores,
        epsilon,
        sensitivity,
        k=k,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
    )


def top_k_args(fn, key, scores, k, epsilon, sensitivity, shape, axis):
    """:func:`jaxdp._checks.selection_args` plus ``k``: a static int in ``[1, n]``, and
    (for concrete scores) at least ``k`` finite scores in every row. Returns
    ``(key, scores, epsilon, sensitivity, shape, k)``."""
    key, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, scores, epsilon, sensitivity, shape, axis
    )
    n = scores.shape[-1]
    k = _checks.static_int(k, fn, "k", minimum=1)
    if k > n:
        raise ValueError(f"{fn}: k must be <= the number of outcomes n={n}, got k={k}")
    integer = jnp.issubdtype(scores.dtype, jnp.integer)  # always finite
    if _checks.is_concrete(scores) and not integer and _too_few_finite(scores, k):
        raise ValueError(
            f"{fn}: every row of scores needs at least k={k} finite scores to select k "
            "distinct outcomes"
        )
    return key, scores, epsilon, sensitivity, shape, k


@_checks.eager
def _too_few_finite(scores, k):
    return bool(jnp.any(jnp.sum(scores > -jnp.inf, axis=-1) < k))


@partial(jax.jit, static_argnames=("k", "monotonic", "shape"))
def _top_k_impl(key, scores, epsilon, sensitivity, *, k, monotonic, shape):
    fn = "top_k"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    if not jnp.issubdtype(scores.dtype, jnp.integer):  # the concrete check of top_k_args
        debug_check(
            jnp.all(jnp.sum(scores > -jnp.inf, axis=-1) >= k),
            f"{fn}: every row of scores needs at least k={k} finite scores to select k "
            "distinct outcomes",
        )
    scale = _logits.scale_factor(epsilon / k, sensitivity, monotonic, _checks.compute_dtype())
    logits = _logits.from_scores(scores, scale)
    _checks.debug_check_selectable(fn, logits.row_max)
    valid = _logits.row_valid(logits.row_max, epsilon, sensitivity)
    idx = _noisy_kernels.noisy_argmax(key, logits, shape, "gumbel", k=k)
    return jnp.where(jnp.broadcast_to(valid, shape)[..., None], idx, -1)
