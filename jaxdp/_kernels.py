"""Vectorised sampling kernels shared by the finite-range mechanisms.

Everything here works on *logits*: ``(..., n)`` arrays, already scaled by
epsilon / (2 * sensitivity) and shifted so each row's maximum is 0. Public
functions validate, canonicalise and then call these under ``jax.jit``.

Two ways to draw ``argmax``-style selections:

* :func:`noisy_argmax`: argmax(logits + noise), one noise variate per
  candidate per draw (Gumbel: the exponential mechanism; Laplace and
  exponential noise: report-noisy-max). Work is chunked so that no
  ``draws x n`` noise array is ever materialised beyond a cache-sized block.
* :func:`inverse_cdf`: one pass of ``exp`` + prefix sum per row, then each draw
  is one uniform and a binary search: O(n + S log n) for S draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import _random
from ._typing import Array, PRNGKey

#: Elements (candidates x draws) processed per chunk by the noise kernels. About
#: 4 MiB of float32: inside the L2/L3 caches of current CPUs.
CHUNK_ELEMENTS = 1 << 20


# ----------------------------------------------------------------------------- logits


def broadcast_batch(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(jnp.broadcast_shapes(*shapes))


def scale_factor(epsilon: Array, sensitivity: Array, monotonic: bool, dtype) -> Array:
    """epsilon / (2 * sensitivity), or epsilon / sensitivity when monotonic."""
    epsilon = jnp.asarray(epsilon, dtype)
    sensitivity = jnp.asarray(sensitivity, dtype)
    denom = sensitivity if monotonic else 2 * sensitivity
    return epsilon / denom


def to_logits(scores: Array, scale: Array) -> Array:
    """Scaled, max-shifted logits, broadcast to ``broadcast(batch, scale) + (n,)``.

    ``scores`` is ``(..., n)``; ``scale`` broadcasts against the batch shape
    ``scores.shape[:-1]``. Each row's maximum becomes exactly 0, so large
    offsets (1e30, 2**24 and above) do not move the law; ``-inf`` scores stay
    ``-inf``. Guards avoid ``0 * inf`` and ``-inf * 0``, so no NaN comes out of
    finite inputs even when ``scale`` over- or underflows.
    """
    batch = broadcast_batch(scores.shape[:-1], jnp.shape(scale))
    n = scores.shape[-1]
    scores = jnp.broadcast_to(scores, batch + (n,))
    scale = jnp.broadcast_to(jnp.asarray(scale, scores.dtype), batch)[..., None]
    row_max = jnp.max(scores, axis=-1, keepdims=True)
    row_max = jnp.where(jnp.isfinite(row_max), row_max, jnp.zeros_like(row_max))
    shifted = scores - row_max
    logits = jnp.where(shifted == 0, jnp.zeros_like(shifted), shifted * scale)
    return jnp.where(scores == -jnp.inf, -jnp.inf, logits)


def row_valid(scores: Array, *params: Array) -> Array:
    """Boolean batch-shaped mask: the row has a finite score, no NaN/+inf, and
    every privacy parameter is finite and > 0. Rows that fail give -1."""
    ok = jnp.any(scores > -jnp.inf, axis=-1) & ~jnp.any(
        jnp.isnan(scores) | (scores == jnp.inf), axis=-1
    )
    batch = broadcast_batch(ok.shape, *(jnp.shape(p) for p in params))
    ok = jnp.broadcast_to(ok, batch)
    for p in params:
        ok = ok & jnp.broadcast_to(jnp.isfinite(p) & (p > 0), batch)
    return ok


def split_shape(shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(number of leading i.i.d. draws, tail batch shape) for a draw ``shape``."""
    lead = shape[: len(shape) - len(batch)]
    tail = shape[len(shape) - len(batch) :]
    return math.prod(lead), tuple(tail)


def flatten_rows(logits: Array, tail: tuple[int, ...]) -> Array:
    """Broadcast ``(*batch, n)`` logits to ``tail + (n,)`` and flatten to ``(B, n)``."""
    n = logits.shape[-1]
    logits = jnp.broadcast_to(logits, tail + (n,))
    return logits.reshape((math.prod(tail), n))


# ----------------------------------------------------------------------------- noise

NOISES: dict[str, Callable] = {
    "gumbel": _random.gumbel,
    "laplace": _random.laplace,
    "exponential": _random.exponential,
}


def _chunked_draws(
    key: PRNGKey, num: int, per_item: int, body: Callable[[PRNGKey, Array], Array]
) -> Array:
    """Evaluates ``body(key, item_ids)`` over ``num`` items in cache-sized chunks.

    ``body`` returns an array with leading dim ``len(item_ids)``. Chunks run
    sequentially in a ``lax.map`` (one compiled body), each with its own key.
    """
    chunk = max(1, min(num, CHUNK_ELEMENTS // max(per_item, 1)))
    nchunks = -(-num // chunk)
    if nchunks == 1:
        return body(key, jnp.arange(num))
    chunk = -(-num // nchunks)  # balance the chunks
    keys = jax.random.split(key, nchunks)
    starts = jnp.arange(nchunks) * chunk
    out = jax.lax.map(lambda ks: body(ks[0], ks[1] + jnp.arange(chunk)), (keys, starts))
    out = out.reshape((nchunks * chunk,) + out.shape[2:])
    return out[:num]


def noisy_argmax(
    key: PRNGKey, logits: Array, shape: tuple[int, ...], noise: str, k: int | None = None
) -> Array:
    """argmax (or top-k) of ``logits + noise`` for draws of ``shape``.

    ``logits``: ``(*batch, n)``; ``shape`` ends with dims that ``batch``
    broadcasts to. Returns int32 ``shape`` (``shape + (k,)`` for top-k).
    Chunked over draws so at most ``CHUNK_ELEMENTS`` noise values are live.
    """
    batch = logits.shape[:-1]
    n = logits.shape[-1]
    num_lead, tail = split_shape(shape, batch)
    rows = flatten_rows(logits, tail)
    num_rows = rows.shape[0]
    sample_noise = NOISES[noise]
    dtype = logits.dtype

    def select(noisy: Array) -> Array:
        if k is None:
            return jnp.argmax(noisy, axis=-1).astype(jnp.int32)
        values, idx = jax.lax.top_k(noisy, k)
        return jnp.where(values == -jnp.inf, -1, idx).astype(jnp.int32)

    def body(key: PRNGKey, item_ids: Array) -> Array:
        if num_rows == 1:
            row_logits = jnp.broadcast_to(rows, (item_ids.shape[0], n))
        else:
            row_logits = rows[item_ids % num_rows]
        return select(row_logits + sample_noise(key, row_logits.shape, dtype))

    out = _chunked_draws(key, num_lead * num_rows, n, body)
    suffix = () if k is None else (k,)
    return out.reshape(shape + suffix)


# ----------------------------------------------------------------------------- inverse CDF


def _last_positive(p: Array) -> Array:
    n = p.shape[-1]
    return (n - 1 - jnp.argmax(jnp.flip(p > 0, axis=-1), axis=-1)).astype(jnp.int32)


def inverse_cdf(key: PRNGKey, logits: Array, shape: tuple[int, ...]) -> Array:
    """Categorical draws by the inverse CDF of ``softmax(logits)``.

    Per row: ``p = exp(logits)`` (max 1, no overflow), an inclusive prefix sum
    ``c``, then each draw takes ``u ~ U[0, 1)`` and returns the first index with
    ``c[i] > u * c[-1]`` (``side="right"``): an outcome of probability 0 adds
    nothing to ``c`` and so is never returned. Indices are clamped to the last
    positive-probability outcome against float rounding of ``u * c[-1]``.
    """
    batch = logits.shape[:-1]
    num_lead, tail = split_shape(shape, batch)
    rows = flatten_rows(logits, tail)
    num_rows, n = rows.shape
    dtype = logits.dtype

    p = jnp.exp(rows)
    cdf = jnp.cumsum(p, axis=-1)
    total = cdf[:, -1]
    last = _last_positive(p)
    u = _random.uniform(key, (num_lead, num_rows), dtype)
    v = u * total[None, :]
    if num_rows == 1:
        idx = jnp.searchsorted(cdf[0], v[:, 0], side="right")[:, None]
    else:
        idx = jax.vmap(
            lambda c, x: jnp.searchsorted(c, x, side="right"), in_axes=(0, 1), out_axes=1
        )(cdf, v)
    idx = jnp.minimum(idx.astype(jnp.int32), last[None, :])
    return idx.reshape(shape)


# ----------------------------------------------------------------------------- auto


def choose_method(num_draws_per_row: int, n: int, num_rows: int) -> str:
    """The faster of ``"gumbel"`` and ``"inverse_cdf"`` for these static sizes.

    Gumbel-max costs ``S * n`` noise variates per row; the inverse CDF costs
    ``n`` exps and a prefix sum per row, then ``log2(n)`` steps per draw. See
    ``benchmarks/`` for the measured crossover on which this rule rests.
    """
    del num_rows
    if num_draws_per_row > 1:
        return "inverse_cdf"
    return "gumbel" if n <= 16 else "inverse_cdf"


def np_int(x) -> int:
    return int(np.asarray(x))
