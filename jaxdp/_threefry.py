"""The fused threefry: JAX's threefry2x32 stream, lowered so that XLA fuses it.

Every variate of jaxdp comes from :mod:`jaxdp._random` (the hardened
generators). Before sampling, a threefry key is re-wrapped by :func:`fast_key`
into an implementation that computes *the same threefry2x32 bits* (verified
bit for bit against :func:`jax.random.bits` by the tests), but unrolled, so
that XLA fuses the hash with the arithmetic that consumes it. JAX lowers
threefry on CPU as a rolled loop over full-size arrays, which costs 2x (in
cache) to 6x (16M values) in throughput. Keys of other implementations
(``rbg``, ``unsafe_rbg``, custom) are used as given.

PRNG choice (not made for the user). ``jax.random.key(seed, impl="rbg")`` or
``"unsafe_rbg"`` keys are accepted by every sampler and are cheaper on GPU
(XLA's RngBitGenerator, Philox). For a privacy library the trade-off is: the
noise's only job is to be unpredictable and independent; threefry2x32 is a
counter-based generator with a published cryptanalysis margin (Salmon et al.
2011), its streams are identical on every backend and under every sharding,
and ``split``/``fold_in`` derive independent keys; ``rbg`` keeps threefry for
splitting but generates bits with RngBitGenerator, whose streams may change
across backends and XLA versions (reproducibility of a release is lost), and
``unsafe_rbg`` also splits with it, which has no stated independence
guarantee for derived keys. None of them is a cryptographically secure
generator; a deployment that must resist an adversary who could predict the
noise should seed from OS entropy (``jaxdp.random_key``) and keep the key
secret. jaxdp therefore keeps threefry as the default and leaves the faster
implementations as an explicit user choice; ``python -m benchmarks`` reports
what they buy.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import define_prng_impl, threefry_prng_impl

from ._typing import Array, PRNGKey

#: The tag of the fused implementation's keys (``jax.random.key_impl`` reports it).
TAG = "fryf"


def _rotl(x: Array, d: int) -> Array:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(k1: Array, k2: Array, x1: Array, x2: Array) -> tuple[Array, Array]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), unrolled elementwise ops."""
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    a, b = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in rotations[i % 2]:
            a = a + b
            b = _rotl(b, r) ^ a
        a = a + ks[(i + 1) % 3]
        b = b + ks[(i + 2) % 3] + np.uint32(i + 1)
    return a, b


_UINT = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32, 64: jnp.uint64}


def _counter_hash(key: Array, shape: tuple[int, ...]) -> tuple[Array, Array] | None:
    """JAX's partitionable threefry stream, unrolled: element ``i`` (row-major) of
    ``shape`` hashes the 64-bit counter ``i`` as ``(hi, lo)`` words, giving two
    words. None when that stream is not the active one or when the counter does
    not fit in 32 bits (the callers then use JAX's own implementation)."""
    size = math.prod(shape)
    if not jax.config.jax_threefry_partitionable or size >= 2**32:
        return None
    lo = jax.lax.broadcasted_iota(jnp.uint32, (size,), 0).reshape(shape)
    return threefry2x32(key[0], key[1], jnp.zeros_like(lo), lo)


def _fused_threefry_bits(key: Array, bit_width: int, shape: tuple[int, ...]) -> Array:
    """``jax.random.bits`` of a threefry key, bit for bit, as one fusable expression
    (:func:`_counter_hash`; JAX's own implementation where that gives None)."""
    words = _counter_hash(key, shape)
    if words is None:
        return threefry_prng_impl.random_bits(key, bit_width, shape)
    b1, b2 = words
    if bit_width == 64:
        return (b1.astype(jnp.uint64) << np.uint64(32)) | b2.astype(jnp.uint64)
    out = b1 ^ b2
    return out if bit_width == 32 else out.astype(_UINT[bit_width])


def _fused_threefry_split(key: Array, shape: tuple[int, ...]) -> Array:
    """``jax.random.split`` of a threefry key, bit for bit, unrolled.

    JAX's partitionable split hashes the counter of each new key as
    :func:`_fused_threefry_bits` does for bits (:func:`_counter_hash`); its own
    lowering on CPU is a rolled loop, one per split, which under ``vmap`` (a batch
    of keys) costs more than the draws it feeds. JAX's own implementation where
    :func:`_counter_hash` gives None.
    """
    words = _counter_hash(key, shape)
    if words is None:
        return threefry_prng_impl.split(key, shape)
    b1, b2 = words
    # Materialised once: fused into each reader, XLA:CPU would hash the new keys
    # again for every draw that reads them.
    return jax.lax.optimization_barrier(jnp.stack([b1, b2], axis=-1))


_FUSED_THREEFRY = define_prng_impl(
    key_shape=threefry_prng_impl.key_shape,
    seed=threefry_prng_impl.seed,
    split=_fused_threefry_split,
    random_bits=_fused_threefry_bits,
    fold_in=threefry_prng_impl.fold_in,
    name="threefry2x32_fused",
    tag=TAG,
)


def fused_threefry(key: PRNGKey) -> PRNGKey:
    """``key`` re-wrapped as a threefry key with the fusable lowering (same bits).

    Does not consume ``key`` for JAX's key-reuse checker; use :func:`fast_key`.
    """
    return jax.random.wrap_key_data(jax.random.key_data(key), impl=_FUSED_THREEFRY)


def fast_key(key: PRNGKey) -> PRNGKey:
    """A fresh key derived from ``key``, generating bits through a fusable lowering.

    A threefry2x32 key is re-wrapped by :func:`fused_threefry`: the same
    stream (bit for bit), hence the same law and the same draws, with a faster
    lowering; ``key`` itself is marked as consumed for JAX's key-reuse
    checker. Keys of other implementations are returned as they are.
    """
    if jax.random.key_impl(key) != "threefry2x32":
        return key
    # An empty draw marks `key` as used for JAX's key-reuse checker; the new
    # key then carries the same stream, consumed once by the caller.
    jax.random.bits(key, (0,), jnp.uint32)
    return fused_threefry(key)
