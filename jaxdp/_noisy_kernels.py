"""Noisy argmax: argmax (or top-k) of logits plus i.i.d. noise, in cache-sized chunks.

Gumbel noise gives the exponential mechanism, Laplace and exponential noise
report-noisy-max (and permute-and-flip). Split out of :mod:`jaxdp._kernels`;
see there for the CPU notes and the PRNG.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from . import _random
from ._kernels import _even_chunks, _logit_params, _map_steps, fast_key, flatten_rows, split_shape
from ._typing import Array, PRNGKey

#: Noise values (draws x rows x candidates) live at once in :func:`noisy_argmax`:
#: 1 MiB of float32, inside the L2 cache of current CPUs.
CHUNK_ELEMENTS = 1 << 18

NOISES: dict[str, Callable] = {
    "gumbel": _random.gumbel,
    "laplace": _random.laplace,
    "exponential": _random.exponential,
}


def _first_argmax(z: Array) -> tuple[Array, Array]:
    """(max, first index of the max) along the last axis, as two plain reductions."""
    n = z.shape[-1]
    best = jnp.max(z, axis=-1)
    iota = jax.lax.broadcasted_iota(jnp.int32, z.shape, z.ndim - 1)
    arg = jnp.min(jnp.where(z == best[..., None], iota, n), axis=-1)
    return best, jnp.minimum(arg, n - 1)


def noisy_argmax(
    key: PRNGKey,
    logits: Array,
    shape: tuple[int, ...],
    noise: str,
    k: int | None = None,
    scores: Array | None = None,
    scale: Array | None = None,
) -> Array:
    """argmax (or top-k) of ``logits + noise`` for draws of ``shape``.

    ``logits``: ``(*batch, n)``; ``shape`` ends with dims that ``batch``
    broadcasts to. Returns int32 ``shape`` (``shape + (k,)`` for top-k).
    At most :data:`CHUNK_ELEMENTS` noise values are live at a time: a step
    covers several draws of all rows, or a block of rows of one draw, or (for
    rows longer than the chunk) one row whose candidates are scanned block by
    block with a running maximum (a running top-k for ``k``). Ties between
    equal noisy values go to the lowest index (probability 0 for continuous
    noise); ``-inf`` logits are never selected unless the whole row is ``-inf``.

    When the logits are ``to_logits(scores, scale)`` and ``scores`` already has
    the full batch shape, passing ``scores`` and ``scale`` lets each block of
    rows recompute its logits from ``scores``, so the ``(B, n)`` logits are
    never materialised (no temporary of the size of the input).
    """
    batch = logits.shape[:-1]
    n = logits.shape[-1]
    num_lead, tail = split_shape(shape, batch)
    rows = flatten_rows(logits, tail)
    num_rows = rows.shape[0]
    sample_noise = NOISES[noise]
    dtype = logits.dtype
    key = fast_key(key)
    suffix = () if k is None else (k,)
    out_shape = shape + suffix

    def select(z: Array) -> Array:
        if k is None:
            return _first_argmax(z)[1]
        values, idx = jax.lax.top_k(z, k)
        return jnp.where(values == -jnp.inf, -1, idx).astype(jnp.int32)

    if num_rows * n <= CHUNK_ELEMENTS:
        # A step draws `per` i.i.d. draws for all rows at once.
        per, steps = _even_chunks(num_lead, CHUNK_ELEMENTS // (num_rows * n))

        def body(key: PRNGKey, step: Array) -> Array:
            z = rows[None] + sample_noise(key, (per, num_rows, n), dtype)
            return select(z)

        out = _map_steps(body, key, steps).reshape((steps * per, num_rows) + suffix)
        out = out if steps * per == num_lead else out[:num_lead]
        return out.reshape(out_shape)

    if n <= CHUNK_ELEMENTS:
        # A step covers a block of `per` rows of one draw.
        most = max(1, CHUNK_ELEMENTS // n)
        per = max(d for d in range(1, min(most, num_rows) + 1) if num_rows % d == 0)
        if scores is not None and tuple(scores.shape) == tail + (n,) and 4 * per >= most:
            # Recompute each block's logits from the scores (a view, no copy).
            _, row_max, row_scale = _logit_params(scores, scale)
            source = scores.reshape(num_rows, n)
            shift, factor = row_max.reshape(num_rows, 1), row_scale.reshape(num_rows, 1)
            blocks = num_rows // per

            def block_logits(start: Array) -> Array:
                part = jax.lax.dynamic_slice_in_dim(source, start, per, axis=0)
                shift_b = jax.lax.dynamic_slice_in_dim(shift, start, per, axis=0)
                factor_b = jax.lax.dynamic_slice_in_dim(factor, start, per, axis=0)
                return (part - shift_b) * factor_b

        else:
            per = most
            blocks = -(-num_rows // per)
            per = -(-num_rows // blocks)
            padded = jnp.pad(rows, ((0, blocks * per - num_rows), (0, 0)))

            def block_logits(start: Array) -> Array:
                return jax.lax.dynamic_slice_in_dim(padded, start, per, axis=0)

        def body(key: PRNGKey, step: Array) -> Array:
            block = block_logits((step % blocks) * per)
            return select(block + sample_noise(key, (per, n), dtype))

        out = _map_steps(body, key, num_lead * blocks)
        out = out.reshape((num_lead, blocks * per) + suffix)[:, :num_rows]
        return out.reshape(out_shape)

    # Rows longer than a chunk: scan the candidates in blocks, keep the running best.
    width = CHUNK_ELEMENTS
    nblocks = -(-n // width)
    padded = jnp.pad(rows, ((0, 0), (0, nblocks * width - n)), constant_values=-jnp.inf)

    def body(key: PRNGKey, step: Array) -> Array:
        row = padded[step % num_rows]
        block_keys = jax.random.split(key, nblocks)

        def scan_block(carry, xs):
            block_key, b = xs
            z = jax.lax.dynamic_slice_in_dim(row, b * width, width) + sample_noise(
                block_key, (width,), dtype
            )
            if k is None:
                best, arg = carry
                zmax, zarg = _first_argmax(z)
                better = zmax > best  # earlier block wins ties: the lowest index
                return (
                    jnp.where(better, zmax, best),
                    jnp.where(better, zarg + b * width, arg),
                ), None
            values, idx = carry
            zv, zi = jax.lax.top_k(z, k)
            both_v = jnp.concatenate([values, zv])
            both_i = jnp.concatenate([idx, zi + b * width])
            top_v, pos = jax.lax.top_k(both_v, k)
            return (top_v, both_i[pos]), None

        if k is None:
            init = (jnp.array(-jnp.inf, dtype), jnp.array(0, jnp.int32))
        else:
            init = (jnp.full((k,), -jnp.inf, dtype), jnp.zeros((k,), jnp.int32))
        (best, arg), _ = jax.lax.scan(scan_block, init, (block_keys, jnp.arange(nblocks)))
        if k is None:
            return arg
        return jnp.where(best == -jnp.inf, -1, arg).astype(jnp.int32)

    out = _map_steps(body, key, num_lead * num_rows)
    return out.reshape(out_shape)
