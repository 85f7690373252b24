"""The one categorical sampler every mechanism draws through.

``categorical(key, logits, shape)`` draws indices ``r`` along the last axis of
``logits`` with probability ``exp(logits[r]) / sum(exp(logits))``; ``-inf``
logits are never drawn, and a row without a finite logit (or with a NaN or
``+inf``) returns -1. ``shape`` follows :func:`jax.random.categorical`.

Mechanisms that build their own log-weights (joint quantiles, joint top-k, the
base measure) call this instead of a kernel, so that they inherit its
finite-precision guarantee (``SECURITY.md``).
"""

from __future__ import annotations

import jax.numpy as jnp

from . import _kernels
from ._typing import Array, PRNGKey


def categorical(key: PRNGKey, logits: Array, shape: tuple[int, ...]) -> Array:
    """Int32 draws of ``shape`` from ``softmax(logits)`` along the last axis."""
    logits = jnp.asarray(logits)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        logits = logits.astype(jnp.float32)
    row_max = jnp.max(logits, axis=-1, keepdims=True)
    ok = jnp.isfinite(row_max[..., 0])
    shifted = logits - jnp.where(ok[..., None], row_max, 0)
    idx, rows_ok = _kernels.inverse_cdf(key, shifted, tuple(shape))
    valid = jnp.broadcast_to(
        ok & rows_ok, shape[len(shape) - rows_ok.ndim :] if rows_ok.ndim else ()
    )
    return jnp.where(jnp.broadcast_to(valid, shape), idx, -1)
