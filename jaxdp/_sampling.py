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

from . import _inverse_cdf, _logits
from ._typing import Array, PRNGKey


def categorical(key: PRNGKey, logits: Array, shape: tuple[int, ...]) -> Array:
    """Int32 draws of ``shape`` from ``softmax(logits)`` along the last axis."""
    logits = jnp.asarray(logits)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        logits = logits.astype(jnp.float32)
    shifted, ok = _logits.shift_log_weights(logits)
    idx, rows_ok = _inverse_cdf.from_logits(key, shifted, tuple(shape))
    tail = shape[len(shape) - rows_ok.ndim :] if rows_ok.ndim else ()
    valid = jnp.broadcast_to(ok & rows_ok, tail)
    return jnp.where(jnp.broadcast_to(valid, shape), idx, -1)
