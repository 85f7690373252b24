"""Noise generators used by every sampler, hardened for floating point.

All generators take ``(key, shape, dtype)`` and consume ``key`` exactly once
(one call to :func:`jax.random.bits`). They differ from :mod:`jax.random` in
three ways, each pinned by ``tests/test_hardening.py``:

* **Open interval.** :func:`uniform` never returns 0 or 1, so ``log(u)`` and
  ``log1p(-u)`` are always finite: no generator here returns ``+-inf`` or NaN.
* **Fine resolution near 0.** A uniform is built from *all* the random bits
  of a word, ``u = (k + 1/2) / 2**32`` for a 32-bit word ``k`` (64-bit words in
  float64), rounded once to the float grid. Its smallest value is ``2**-33``
  (``2**-65`` in float64), against ``2**-23`` for :func:`jax.random.uniform`,
  whose 23 random mantissa bits put every value on a fixed grid. Near 1 the
  float grid itself limits it to ``1 - 2**-24`` (``1 - 2**-53``).
* **The resolved tail is the one that matters.** Each variate is written so
  that the uniform's fine end feeds the tail that decides rare selections:

  ===========  =====================  ========================================
  noise        formula                range in float32 (jax.random's)
  ===========  =====================  ========================================
  exponential  ``-log(u)``            (6e-8, 22.9]     (jax: [0, 15.9])
  gumbel       ``-log(-log1p(-u))``   [-2.8, 22.9]     (jax: [-4.5, 15.9])
  laplace      sign * ``-log(u')``    [-22.2, 22.2]    (jax: [-16.6, 16.6])
  ===========  =====================  ========================================

  With noise of scale 1 added to logits, an outcome whose logit is ``g`` below
  the best can only win when the noise difference exceeds ``g``; the upper
  tail therefore sets the smallest selection probability that is resolved:
  about ``e**-22.9 = 1e-10`` here against ``e**-15.9 = 1e-7`` for the stock
  generators (float64: about ``e**-45``). Probabilities below that are
  mis-weighted, and one below ``e**-25.7`` (float32, Gumbel) is drawn with
  probability exactly 0; see ``SECURITY.md``.

float16 and bfloat16 variates are computed in float32 and rounded (every value
above fits their range). Cost: the same number of random bits as
:mod:`jax.random` (threefry dominates); the int-to-float conversion replaces
a bit trick, and Gumbel noise uses ``log1p`` where jax uses ``log``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._threefry import TAG as _FUSED_TAG
from ._threefry import threefry2x32
from ._typing import Array, PRNGKey


def _work(dtype) -> tuple[np.dtype, np.dtype, int]:
    """(float dtype to compute in, unsigned word dtype, bits per word)."""
    dtype = np.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"noise dtype must be floating, got {dtype}")
    if dtype.itemsize == 8:
        return np.dtype(np.float64), np.dtype(np.uint64), 64
    return np.dtype(np.float32), np.dtype(np.uint32), 32


def _unit(words: Array, nbits: int, work: np.dtype) -> Array:
    """Open-interval uniforms ``(k + 1/2) / 2**nbits`` from unsigned words ``k``.

    The conversion rounds to nearest once; values that round up to 1 are
    clamped to the largest float below 1, so the result is in (0, 1).
    """
    below_one = np.nextafter(work.type(1), work.type(0))
    u = (words.astype(work) + work.type(0.5)) * work.type(2.0**-nbits)
    return jnp.minimum(u, below_one)


def _finish(x: Array, dtype) -> Array:
    return x if x.dtype == np.dtype(dtype) else x.astype(dtype)


def uniform(key: PRNGKey, shape, dtype) -> Array:
    """U(0, 1) variates in the *open* interval, smallest value 2**-33 (f64: 2**-65)."""
    work, word, nbits = _work(dtype)
    u = _unit(jax.random.bits(key, shape, word), nbits, work)
    if np.dtype(dtype) == work:
        return u
    # float16 / bfloat16: round, then keep the interval open in the target dtype.
    info = jnp.finfo(dtype)
    lo = jnp.asarray(info.smallest_subnormal, dtype)
    hi = jnp.asarray(1 - info.epsneg, dtype)
    return jnp.clip(u.astype(dtype), lo, hi)


def gumbel(key: PRNGKey, shape, dtype) -> Array:
    """Standard Gumbel variates, finite, upper tail resolved to P ~ 1e-10 (f32)."""
    work, word, nbits = _work(dtype)
    u = _unit(jax.random.bits(key, shape, word), nbits, work)
    # -log1p(-u) is an Exp(1) variate resolved down to ~u near 0: the Gumbel's
    # upper tail. It is >= 2**-33 > 0, so the outer log is finite.
    return _finish(-jnp.log(-jnp.log1p(-u)), dtype)


def exponential(key: PRNGKey, shape, dtype) -> Array:
    """Standard exponential variates (rate 1), in (0, 22.9] for float32; never 0 or inf."""
    work, word, nbits = _work(dtype)
    u = _unit(jax.random.bits(key, shape, word), nbits, work)
    return _finish(-jnp.log(u), dtype)


def laplace(key: PRNGKey, shape, dtype) -> Array:
    """Standard Laplace variates (scale 1), in [-22.2, 22.2] for float32; never inf.

    The top bit of each word is the sign, the other bits an Exp(1) magnitude.
    """
    work, word, nbits = _work(dtype)
    words = jax.random.bits(key, shape, word)
    top = word.type(1 << (nbits - 1))
    magnitude = -jnp.log(_unit(words & (top - word.type(1)), nbits - 1, work))
    return _finish(jnp.where(words >= top, magnitude, -magnitude), dtype)


def normal(key: PRNGKey, shape, dtype) -> Array:
    """Standard normal variates by Box-Muller, tails resolved to 9.4 sigma.

    The radius ``sqrt(-2 log u)`` takes a 64-bit uniform (two words, smallest
    value 2**-65, also in float32), so ``|z|`` reaches 9.4: the truncated tail
    has mass below 1e-20. :func:`jax.random.normal` stops at 5.3 sigma in
    float32 (mass 1.2e-7), which adds up to ``Phi(Delta/sigma - 5.3)`` to the
    delta of the Gaussian mechanism (1.6e-7 at eps = 1, delta = 1e-9). The
    angle takes one word; each (radius, angle) pair gives two variates.
    """
    work, _, nbits = _work(dtype)
    shape = tuple(shape)
    half = -(-math.prod(shape) // 2)
    z = _box_muller(jax.random.bits(key, (3, half), jnp.uint32), nbits, work)
    return _finish(z[: math.prod(shape)].reshape(shape), dtype)


def _box_muller(words: Array, nbits: int, work: np.dtype) -> Array:
    """Two normals per column of ``words`` ``[3, m]``: 64-bit radius, 32-bit angle."""
    below_one = np.nextafter(work.type(1), work.type(0))
    if nbits == 64:
        u = _unit(jax.lax.bitcast_convert_type(words[:2].T, jnp.uint64), 64, work)
    else:
        hi = words[0].astype(work)
        lo = (words[1].astype(work) + work.type(0.5)) * work.type(2.0**-32)
        u = jnp.minimum((hi + lo) * work.type(2.0**-32), below_one)
    radius = jnp.sqrt(work.type(-2) * jnp.log(u))
    angle = work.type(2 * np.pi) * _unit(words[2], 32, work)
    return jnp.concatenate([radius * jnp.cos(angle), radius * jnp.sin(angle)])


def discrete_laplace(key: PRNGKey, shape, scale: Array, dtype) -> Array:
    """Two-sided geometric variates on the integers, P[k] ∝ exp(-|k| / scale).

    The difference of two i.i.d. geometric variates ``floor(E / rate)`` with
    ``E ~ Exp(1)`` and ``rate = 1 / scale``. Returned as integer-valued floats
    of ``dtype``. ``scale`` broadcasts with ``shape``.
    """
    work, _, _ = _work(dtype)
    e = exponential(key, (2,) + tuple(shape), work)
    # P[floor(E * scale) >= g] = P[E >= g / scale] = exp(-g / scale).
    g = jnp.floor(e * jnp.broadcast_to(jnp.asarray(scale, work), tuple(shape))[None])
    return _finish(g[0] - g[1], dtype)


# ----------------------------------------------------------------------------- 64-bit race noise
#
# The noise-based selection paths (jaxdp._noisy_kernels, jaxdp._streaming) do
# not add noise to logits: they take the argmin of ``X_i * r_i`` with
# ``r_i = exp(-logit_i)`` (an exponential race) and ``X`` one of the variates
# below. Each is built from a 64-bit uniform, so its CDF near 0 (the part that
# decides rare selections) is resolved to 2**-65 in absolute terms and to a few
# float32 roundings in relative terms; see SECURITY.md, "Finite precision:
# noise-based paths".

_THREEFRY_IMPLS = ("threefry2x32", _FUSED_TAG)


def bits64(key: PRNGKey, shape) -> tuple[Array, Array]:
    """64 random bits per element, as two uint32 words ``(hi, lo)``; consumes ``key`` once.

    For threefry keys (JAX's default and the fused lowering of
    :func:`jaxdp._threefry.fast_key`) element ``i`` (row-major) is the threefry2x32
    block of the 64-bit counter ``i``: both output words are used, so 64 bits cost
    one hash, as 32 bits do in :func:`jax.random.bits`. This is the stream of
    ``jax.random.bits(key, shape, jnp.uint64)`` under ``jax_enable_x64`` with the
    partitionable threefry, split into its high and low words. Other key
    implementations draw ``(2, *shape)`` words with :func:`jax.random.bits`.
    """
    shape = tuple(shape)
    words = key_words(key) if math.prod(shape) < 2**32 else None
    if words is None:
        bits = jax.random.bits(key, (2,) + shape, jnp.uint32)
        return bits[0], bits[1]
    return bits64_words(words, shape)


def key_words(key: PRNGKey) -> tuple[Array, Array] | None:
    """A threefry key's two uint32 words, the key marked as consumed (for JAX's
    key-reuse checker); None for other key implementations."""
    if str(jax.random.key_impl(key)) not in _THREEFRY_IMPLS:
        return None
    jax.random.bits(key, (0,), jnp.uint32)  # marks `key` as consumed for JAX's key-reuse checker
    data = jax.random.key_data(key)
    return data[0], data[1]


def bits64_words(words: tuple[Array, Array], shape, stream: Array | int = 0) -> tuple[Array, Array]:
    """:func:`bits64` from a threefry key's words (:func:`key_words`): element ``i`` of
    ``shape`` (fewer than ``2**32`` elements) is the threefry2x32 block of the 64-bit
    counter ``stream * 2**32 + i``. Streams ``0, 1, ...`` of one key are disjoint
    counters, so independent bits, as from split keys, without the split's hashes
    (one per key) and, under a ``vmap`` over keys, without the split keys'
    ``(batch, count, 2)`` array and its transpose in a ``scan`` over them. Stream 0
    is :func:`bits64`'s stream."""
    shape = tuple(shape)
    counter = jax.lax.broadcasted_iota(jnp.uint32, (math.prod(shape),), 0).reshape(shape)
    high = jnp.broadcast_to(jnp.asarray(stream).astype(jnp.uint32), shape)
    return threefry2x32(words[0], words[1], high, counter)


def streams(key: PRNGKey, steps: int, size: int) -> tuple[Any, Callable[..., tuple[Array, Array]]]:
    """``(xs, bits)`` for a ``lax.scan`` of ``steps`` steps that each draw 64 bits for
    ``size`` elements: step ``x`` of ``xs`` draws ``bits(x, shape)``. For threefry keys
    ``xs`` is ``arange(steps)`` and step t is stream t of the key's words
    (:func:`bits64_words`); for other key implementations (or ``size >= 2**32``)
    ``xs`` are split keys, scanned over (not indexed inside the loop: the key-reuse
    checker), and ``bits`` is :func:`bits64`."""
    words = key_words(key) if size < 2**32 else None
    if words is None:
        return jax.random.split(key, steps), bits64
    return jnp.arange(steps), lambda t, shape: bits64_words(words, shape, t)


def _unit64(hi: Array, lo: Array, hi_bits: int, dtype=jnp.float32) -> Array:
    """``(hi * 2**32 + lo + 1/2) / 2**(32 + hi_bits)`` in float32 (or float64), clamped below 1.

    ``hi < 2**hi_bits``. Computed as ``(f(hi) + f(lo + 1/2) * 2**-32) * 2**-hi_bits``:
    three roundings, so the result is the exact 64-bit-grid value times
    ``exp(theta)`` with ``|theta| <= 3 * 2**-24`` (float64: ``2**-53``); the
    smallest value is ``2**-(33 + hi_bits)``.
    """
    f = np.dtype(dtype).type
    below_one = np.nextafter(f(1), f(0))
    frac = (lo.astype(f) + f(0.5)) * f(2.0**-32)
    return jnp.minimum((hi.astype(f) + frac) * f(2.0**-hi_bits), below_one)


def uniform64(key: PRNGKey, shape, dtype=jnp.float32) -> Array:
    """float32 U(0, 1) on the 64-bit grid ``(k + 1/2) / 2**64``, rounded: smallest 2**-65.

    ``P[U <= p]`` is within ``2**-65`` of ``p * exp(+-3 * 2**-24)`` for every p.
    """
    hi, lo = bits64(key, shape)
    return _unit64(hi, lo, 32, dtype)


def race_exponential(key: PRNGKey, shape, dtype=jnp.float32) -> Array:
    """float32 Exp(1) variates ``-log1p(-U)``, U from :func:`uniform64`: resolved at 0.

    The race variable of the exponential mechanism: ``argmin E_i exp(-logit_i)``
    is the Gumbel-max ``argmax logit_i + G_i`` with ``G = -log E``. The smallest
    value is about 2**-65 (a Gumbel variate of 45); the largest 16.6.
    """
    return race_from_words("gumbel", *bits64(key, shape), dtype)


def race_laplace(key: PRNGKey, shape, dtype=jnp.float32) -> Array:
    """float32 ``exp(-L)`` for L ~ Laplace(0, 1): ``U`` or ``1/U`` by a random sign.

    The top bit of the 64 is the sign, the other 63 give U on the grid
    ``(k + 1/2) / 2**63`` (smallest 2**-64), so ``argmin exp(-L_i) exp(-logit_i)``
    is report-noisy-max with Laplace noise resolved to |L| = 44.4.
    """
    return race_from_words("laplace", *bits64(key, shape), dtype)


def race_from_words(noise: str, hi: Array, lo: Array, dtype=jnp.float32) -> Array:
    """The race variable of ``noise`` from the 64 bits ``(hi, lo)``: a deterministic,
    non-decreasing function of the 64-bit integer ``hi * 2**32 + lo`` for ``"gumbel"``
    (Exp(1)) and ``"exponential"`` (U(0, 1)), and of the low 63 bits on each sign for
    ``"laplace"``. The generators above are this function of :func:`bits64`; the tests
    use it to compute the implemented noise CDF exactly."""
    if noise == "exponential":
        return _unit64(hi, lo, 32, dtype)
    if noise == "gumbel":
        return -jnp.log1p(-_unit64(hi, lo, 32, dtype))
    top = np.uint32(1 << 31)
    u = _unit64(hi & (top - np.uint32(1)), lo, 31, dtype)
    return jnp.where(hi >= top, u, np.dtype(dtype).type(1) / u)


# ----------------------------------------------------------------------------- keys


def random_key(impl: str | None = None) -> PRNGKey:
    """A fresh PRNG key seeded from the operating system's entropy source.

    Every word of the key's state is filled from :func:`os.urandom` (the
    kernel CSPRNG), so the whole key space is reachable (2**64 keys for the
    default threefry2x32), not only the 2**32 of a 32-bit integer seed. Use it
    for deployments; fixed keys (``jax.random.key(0)``) are for tests and
    studies, where reproducibility is the point and privacy is not.

    Args:
      impl: optional PRNG implementation name accepted by :func:`jax.random.key`
        (``"threefry2x32"``, ``"rbg"``, ``"unsafe_rbg"``); default: JAX's default.

    Returns:
      A typed key of shape ``()`` (``jax.random.key`` style).

    Examples:
      >>> import jaxdp
      >>> key = jaxdp.random_key()
      >>> key.shape
      ()

    References:
      The JAX authors, `Pseudorandom numbers
      <https://docs.jax.dev/en/latest/random-numbers.html>`_ (threefry, keys).
    """
    template = jax.random.key_data(jax.random.key(0, impl=impl))
    words = np.frombuffer(os.urandom(template.size * template.dtype.itemsize), template.dtype)
    return jax.random.wrap_key_data(words.reshape(template.shape), impl=impl)
