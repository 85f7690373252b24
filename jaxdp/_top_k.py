"""One-shot private top-k selection."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks, _logits, _noisy_kernels
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

#: Largest k whose k peeling rounds run in float32: each round adds at most
#: 40 * 2**-24 to ε (SECURITY.md, "Finite precision: noise-based paths"), and
#: 4 rounds add 9.5e-6, inside DESIGN.md's ε + 1e-5. Larger k peel in float64.
FLOAT32_ROUNDS = 4

#: What one peeling round adds to ε, per dtype: 40 units of 2**-24 in float32;
#: 543 units of 2**-53 in float64, where XLA:CPU's log1p is off by up to 240
#: units (bounded by 256 in SECURITY.md and checked by the tests).
ROUND_EXCESS = {np.dtype(np.float32): 40 * 2.0**-24, np.dtype(np.float64): 543 * 2.0**-53}


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
    two-float pairs clipped 80 below m, which is exactly as private). Each round
    adds at most 40·2⁻²⁴ to ε in float32, so for k <= 4 (``FLOAT32_ROUNDS``) the
    rounds run in float32: ε' = ε + 40·k·2⁻²⁴ <= ε + 9.5e-6. For larger k they run
    in float64 (rates, noise and products), whatever the global x64 flag, and add
    543·2⁻⁵³ each: ε' = ε + 6.0e-14·k (<= ε + 1e-5 for every k <= 1.6·10⁸). In
    both, δ' = k·n·(1 + e^(ε/k + a))·2⁻⁶⁵, a the round's excess (the 64-bit noise
    grid, per round and outcome); at ε/k = 1, δ'/k = 1.0e-16 (n = 10³), 1.0e-13
    (n = 10⁶), 2.2e-10 (n = 2³¹), and δ' <= 1e-10 while k·n <= 9.9·10⁸ (every k at
    n <= 3.1·10⁴; k <= 990 at n = 10⁶; ``guarantee(n, k, ε)``).
    Derivation: SECURITY.md, "Finite precision: noise-based paths". Cost: k times
    the noise of one round; the float64 rounds cost 2-3× the float32 ones on CPU.

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
    if k <= FLOAT32_ROUNDS or logits.scale.dtype == jnp.float64:
        idx = _noisy_kernels.noisy_argmax(key, logits, shape, "gumbel", k=k)
    else:
        idx = _peel_in_float64(key, logits, shape, k)
    return jnp.where(jnp.broadcast_to(valid, shape)[..., None], idx, -1)


def _peel_in_float64(key, logits, shape, k):
    """The k rounds of :func:`jaxdp._noisy_kernels.noisy_argmax` with rates, noise and
    products in float64 (inside ``jax.enable_x64``, whatever the global flag). The
    float32 scale is rounded down in float64 by the kernel (its 2**-21 covers the
    float32 roundings of ε/k and 2Δ); float scores convert exactly, integer scores
    give their gaps in float64. The indices are integers: no gradient flows in."""
    logits = _logits.no_gradient(logits)
    with jax.enable_x64(True):  # as_float here: integer gaps come out in float64
        wide = jax.tree.map(lambda x: x.astype(jnp.float64), logits.as_float())
        return _noisy_kernels.noisy_argmax(key, wide, shape, "gumbel", k=k)


def guarantee(n: int, k: int, epsilon: float, dtype=np.float32) -> tuple[float, float]:
    """``(ε', δ')`` of one :func:`top_k` draw of ``k`` of ``n`` outcomes at total
    ``epsilon`` with the compute ``dtype`` (SECURITY.md, "Finite precision:
    noise-based paths"): each of the k peeling rounds adds :data:`ROUND_EXCESS` of
    its dtype to ε (float32 for k <= :data:`FLOAT32_ROUNDS` in float32, else
    float64) and ``n (1 + e**(ε/k + excess)) 2**-65`` to δ (the 64-bit noise
    grid), by basic composition."""
    wide = k > FLOAT32_ROUNDS or np.dtype(dtype) == np.float64
    excess = ROUND_EXCESS[np.dtype(np.float64 if wide else np.float32)]
    return epsilon + k * excess, k * n * (1 + np.exp(epsilon / k + excess)) * 2.0**-65
