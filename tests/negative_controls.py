"""Broken samplers kept on purpose: the audits and privacy tests must catch them.

Nothing here is part of jaxdp. Each function reproduces a bug that jaxdp once
shipped (or that a user could plausibly write), with the jaxdp calling
convention ``fn(key, scores, ..., shape=None)``, so that the auditor and the
finite-precision privacy tests can show they would have caught it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def rounding_inverse_cdf(key, scores, epsilon, sensitivity, monotonic=False, shape=None):
    """The float32 inverse-CDF exponential mechanism of issue 10, finding 1 (leaks).

    Exactly what ``jaxdp.exponential(method="inverse_cdf")`` did before the fix:
    float32 logits ``ε·s/Δ`` (``ε·s/(2Δ)`` unless ``monotonic``) shifted to max 0,
    ``p = exp(logits)``, an inclusive ``jnp.cumsum`` made monotone with
    ``jax.lax.cummax`` over ``where(p > 0, cdf, 0)``, and for each draw
    ``searchsorted(cdf, u * total, side="right")`` with ``u ~ U[0, 1)``, clamped
    to the last outcome with ``p > 0``.

    The prefix sums round: an outcome whose ``p`` is below half a float32 spacing
    of the running total gets a CDF rise of exactly 0 (or one spacing when its
    neighbours round the other way), so it is never drawn, and *which* outcomes
    vanish depends on the scores. On ``D = [17, 0, ..., 0]`` and
    ``D' = [17, 1, ..., 1]`` (n = 4096, ε = 1, ``monotonic=True``) about half of
    the non-leader outcomes can never be drawn on D but can on D': an event of
    probability 0 on one side and positive on the other, i.e. no finite ε.

    Args:
      key: a PRNG key.
      scores: ``[n]`` scores.
      epsilon: the claimed ε.
      sensitivity: Δ.
      monotonic: use ``ε/Δ`` instead of ``ε/(2Δ)``.
      shape: leading i.i.d. draws (``None``: one draw).

    Returns:
      int32 indices of shape ``shape`` (``()`` when ``shape`` is None).
    """
    scores = jnp.asarray(scores, jnp.float32)
    factor = epsilon / sensitivity if monotonic else epsilon / (2.0 * sensitivity)
    logits = jnp.float32(factor) * scores
    p = jnp.exp(logits - jnp.max(logits))
    cdf = jax.lax.cummax(jnp.where(p > 0, jnp.cumsum(p), 0.0), axis=0)
    total = cdf[-1]
    last = jnp.max(jnp.where(p > 0, jnp.arange(p.shape[0]), 0))
    u = jax.random.uniform(key, () if shape is None else tuple(shape), jnp.float32)
    idx = jnp.searchsorted(cdf, u * total, side="right")
    return jnp.minimum(idx, last).astype(jnp.int32)


def rounding_inverse_cdf_law(scores, epsilon, sensitivity, monotonic=False):
    """The law :func:`rounding_inverse_cdf` implements (up to the rounding of
    ``u * total``): float64 probabilities ``(cdf[i] - cdf[i-1]) / total`` of its
    float32 CDF, computed by the same JAX ops."""
    import numpy as np

    scores = jnp.asarray(scores, jnp.float32)
    factor = epsilon / sensitivity if monotonic else epsilon / (2.0 * sensitivity)
    logits = jnp.float32(factor) * scores
    p = jnp.exp(logits - jnp.max(logits))
    cdf = np.asarray(jax.lax.cummax(jnp.where(p > 0, jnp.cumsum(p), 0.0), axis=0), np.float64)
    return np.diff(cdf, prepend=0.0) / cdf[-1]


def exact_inverse_cdf(key, scores, epsilon, sensitivity, monotonic=False, shape=None):
    """A sound reference for :func:`rounding_inverse_cdf`: the same inverse CDF in
    float64. Call it (and audit it) inside ``with jax.enable_x64():``; the
    float64 prefix sums are exact to a relative 2**-40 for n <= 2**12 outcomes,
    far below the probabilities (~1e-8) of the outcomes that the float32
    version loses."""
    if not jax.config.jax_enable_x64:
        raise ValueError("exact_inverse_cdf: run it inside `with jax.enable_x64():`")
    scores = jnp.asarray(scores, jnp.float64)
    factor = epsilon / sensitivity if monotonic else epsilon / (2.0 * sensitivity)
    logits = factor * scores
    cdf = jnp.cumsum(jnp.exp(logits - jnp.max(logits)))
    u = jax.random.uniform(key, () if shape is None else tuple(shape), jnp.float64)
    idx = jnp.searchsorted(cdf, u * cdf[-1], side="right")
    return jnp.minimum(idx, scores.shape[0] - 1).astype(jnp.int32)


def float32_joint_top_k_logits(c_sorted, scale, k):
    """The float32 group log-weights ``joint_top_k`` used before it computed its
    weights exactly: ``-fl(scale E)`` plus a float32 sum of the logs of the counts,
    with the errors ``E = fl(c_p - c_l)`` compared as rounded (``c_sorted`` one
    descending row, ``(n,)``). Off by ``u (2 scale E + 2k ln n)``, and a rounded
    error merges groups whose exact errors differ (e.g. ``2**25 - 1`` and
    ``2**25``). Returns ``(k, n)`` logits."""
    n = c_sorted.shape[-1]
    err = c_sorted[:k, None] - c_sorted[None, :]
    err = jnp.where(jnp.isnan(err), jnp.inf, err)
    flat_e = err.reshape(-1)
    pos = jnp.arange(k)
    total = jnp.zeros((k, n), c_sorted.dtype)
    for p in range(k):
        below = jnp.searchsorted(err[p], flat_e, side="left").reshape(k, n)
        upto = jnp.searchsorted(err[p], flat_e, side="right").reshape(k, n)
        count = jnp.where(p < pos[:, None], below, upto) - p
        term = jnp.where(count > 0, jnp.log(jnp.maximum(count, 1).astype(err.dtype)), -jnp.inf)
        total = total + jnp.where(p == pos[:, None], 0.0, term)
    finite = jnp.isfinite(err)
    return jnp.where(finite, total - scale * jnp.where(finite, err, 0), -jnp.inf)
