"""Rows and steps: how a draw ``shape`` splits over the rows of a batch, and how a
kernel walks them in cache-sized steps.

A finite-range sampler sees scores ``(*batch, n)`` and a draw ``shape`` whose
trailing dims the batch broadcasts to (:func:`jax.random.categorical`'s rule);
the kernels flatten that into ``R`` rows of ``n`` outcomes and ``S`` i.i.d.
draws per row (:func:`split_shape`, :func:`flatten_rows`), and the chunked ones
run ``lax.map`` steps of even size (:func:`even_chunks`, :func:`map_steps`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._typing import Array, PRNGKey


def broadcast_batch(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(jnp.broadcast_shapes(*shapes))


def split_shape(shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(number of leading i.i.d. draws, tail batch shape) for a draw ``shape``."""
    lead = shape[: len(shape) - len(batch)]
    tail = shape[len(shape) - len(batch) :]
    return math.prod(lead), tuple(tail)


def flatten_rows(x: Array, tail: tuple[int, ...]) -> Array:
    """Broadcast ``(*batch, n)`` to ``tail + (n,)`` and flatten to ``(B, n)``."""
    n = x.shape[-1]
    x = jnp.broadcast_to(x, tail + (n,))
    return x.reshape((math.prod(tail), n))


def flatten_batch(x: Array, tail: tuple[int, ...]) -> Array:
    """Broadcast a batch-shaped ``x`` to ``tail`` and flatten to ``(B,)``."""
    return jnp.broadcast_to(x, tail).reshape(-1)


def largest_divisor(total: int, most: int) -> int:
    """The largest divisor of ``total`` that is at most ``most`` (both >= 1), in
    ``O(sqrt(total))`` steps (a scan down from ``most`` would be ``O(most)``: seconds
    of tracing for the GPU's chunk sizes)."""
    best = 1
    d = 1
    while d * d <= total:
        if total % d == 0:
            for e in (d, total // d):
                if best < e <= most:
                    best = e
        d += 1
    return best


def even_chunks(total: int, most: int) -> tuple[int, int]:
    """(items per chunk, chunks) covering ``total`` items, at most ``most`` per
    chunk; a divisor of ``total`` when one is at least half of ``most`` (no
    padding, so the stacked result needs no trimming copy)."""
    most = max(1, min(most, total))
    per = largest_divisor(total, most)
    if per >= max(1, most // 2):
        return per, total // per
    chunks = -(-total // most)
    return -(-total // chunks), chunks


def map_steps(body: Callable[[PRNGKey, Array], Array], key: PRNGKey, num_steps: int) -> Array:
    """``stack([body(key_s, s) for s in range(num_steps)])`` as one ``lax.map``."""
    if num_steps == 1:
        return body(key, jnp.zeros((), jnp.int32))[None]
    keys = jax.random.split(key, num_steps)
    return jax.lax.map(lambda ks: body(ks[0], ks[1]), (keys, jnp.arange(num_steps)))
