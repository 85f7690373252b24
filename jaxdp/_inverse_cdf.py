"""The inverse-CDF entry points: categorical draws by the sound kernel of :mod:`jaxdp._descent`.

The kernel (weights exact to a few ulp, then for few draws per row double-float
block sums and a sorted per-level descent, for many an alias table of
:mod:`jaxdp._alias`; :mod:`jaxdp._tuning` chooses) is proven in ``SECURITY.md``
("The categorical kernel"). Two ways in:

* :func:`from_scores`: the logits of a finite-range sampler, as
  :class:`jaxdp._logits.Logits` (scores, row maximum, scale). The weights are
  computed from those factors by :func:`jaxdp._descent.weights`, exact at any
  logit, with the scale rounded down (:func:`jaxdp._descent.scale_down`); the
  descent never writes them to memory (:func:`jaxdp._descent.sample_scores`).
  This is the sound path of the exponential mechanism.
* :func:`from_logits`: logits built by the caller (already max-shifted, e.g. by
  :func:`jaxdp._logits.shift_log_weights`), weights ``exp(logit)``. Used by
  :func:`jaxdp._sampling.categorical`.

Both return the draws (int32, ``shape``) and a tail-batch-shaped flag that the
row is valid (a positive, finite total: false for rows with a NaN, a ``+inf``
or no finite logit, which the callers mask).
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from . import _descent
from ._logits import Logits
from ._rows import flatten_rows, split_shape
from ._threefry import fast_key
from ._typing import Array, PRNGKey


def _no_draws(shape: tuple[int, ...], tail: tuple[int, ...]) -> tuple[Array, Array]:
    return jnp.zeros(shape, jnp.int32), jnp.ones(tail, bool)


def from_scores(key: PRNGKey, logits: Logits, shape: tuple[int, ...]) -> tuple[Array, Array]:
    """Draws of ``shape`` from ``softmax(logits.values())``, the weights computed
    from the factors (see the module docstring)."""
    batch, n = logits.batch, logits.n
    num_lead, tail = split_shape(shape, batch)
    if math.prod(shape) == 0:  # no draws (e.g. scores of shape (0, n))
        return _no_draws(shape, tail)
    rows = flatten_rows(jnp.broadcast_to(logits.scores, batch + (n,)), tail)
    row_max = jnp.broadcast_to(logits.row_max, tail).reshape(-1)
    row_scale = jnp.broadcast_to(_descent.scale_down(logits.scale), tail).reshape(-1)
    idx, ok = _descent.sample_scores(fast_key(key), rows, row_max, row_scale, num_lead)
    return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)


def from_logits(
    key: PRNGKey, logits: Array, shape: tuple[int, ...], low: Array | None = None
) -> tuple[Array, Array]:
    """Draws of ``shape`` from ``softmax(logits + low)`` along the last axis (``(..., n)``
    float logits, not necessarily shifted; ``low``, if given, their double-float low
    parts; ``shape`` ends with dims that their batch broadcasts to). The weights
    are :func:`jaxdp._descent.weights` of the exact differences to the row maximum."""
    num_lead, tail = split_shape(shape, logits.shape[:-1])
    if math.prod(shape) == 0:
        return _no_draws(shape, tail)
    rows = flatten_rows(logits, tail)
    low = None if low is None else flatten_rows(low, tail)
    row_max = jnp.max(rows, axis=-1)
    w = _descent.weights(rows, row_max, jnp.ones_like(row_max), low=low)
    idx, ok = _descent.sample(fast_key(key), w, num_lead)
    return idx.astype(jnp.int32).reshape(shape), ok.reshape(tail)
