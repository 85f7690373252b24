"""Error-free float transforms shared by the sound kernels.

TwoSum uses additions only, and the split clears mantissa bits with a mask
rather than Veltkamp's multiply-and-subtract, so neither can be broken by a
backend that contracts ``a * b + c`` into a fused multiply-add.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array


def two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    """``a + b = s + e`` exactly (Knuth); additions only, so no FMA contraction."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def split(x: Array) -> tuple[Array, Array]:
    """``x = hi + lo`` with ``hi`` keeping the top half of the significand (bit mask):
    12 of float32's 24 significant bits (26 of float64's 53), so products of halves
    are exact in float32."""
    if x.dtype == jnp.float64:
        word, mask = jnp.uint64, np.uint64(0xFFFFFFFFF8000000)  # clear 27 fraction bits
    else:
        word, mask = jnp.uint32, np.uint32(0xFFFFF000)  # clear 12 fraction bits
    hi = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(x, word) & mask, x.dtype)
    return hi, x - hi


def two_prod(a: Array, b: Array) -> tuple[Array, Array]:
    """``a * b = p + e`` (Dekker, with halves from :func:`split`: exact partial products)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def balance(d_hi: Array, d_lo: Array, c: Array) -> tuple[Array, Array, Array]:
    """``(d_hi, d_lo, c)`` rescaled by exact powers of two so that the products of
    the gap ``d = d_hi + d_lo`` with the scale ``c`` keep every partial product of
    :func:`two_prod` (or of :func:`split` halves) normal.

    XLA flushes subnormals to 0. For a scale ``c`` below ``2**-103`` (float32) the
    low half of ``c`` is subnormal, and for ``c`` above ``2**102`` so is the low
    half of any gap small enough to matter: either way a split product loses up to
    ``2**-11`` of itself. So where ``c < 2**-60`` (float64: ``2**-480``) this
    returns ``(d 2**-64, c 2**64)``, where ``c > 2**60`` ``(d 2**64, c 2**-64)``
    (``2**512`` in float64), else the inputs unchanged; ``c`` broadcasts against
    ``d`` (one scale per row). Every product ``d c`` is the same real number,
    except that (a) a gap that underflows had ``|d c| < 2**-122``, and (b) a gap
    scaled up beyond ``2**60`` (``2**500``) is clipped there: then ``|d c|`` was
    above ``2**56`` (``2**468``), a weight of 0 before and after, and the clipped
    product stays finite (its low part is clipped to ``2**40``, ``2**460``).
    Infinite gaps stay infinite unless clipped.
    """
    f = c.dtype.type
    if c.dtype == jnp.float64:
        limit, k, cap, lo_cap = 2.0**480, 2.0**512, 2.0**500, 2.0**460
    else:
        limit, k, cap, lo_cap = 2.0**60, 2.0**64, 2.0**60, 2.0**40
    small, large = c < f(1 / limit), c > f(limit)
    # Per row (c's shape); per element only two products and two clips. The low part
    # is clipped too, so that no product with the scale overflows (an unclipped low
    # part is at most u |hi| <= 2**36 there).
    down = jnp.where(small, f(1 / k), jnp.where(large, f(k), f(1)))
    top = jnp.where(large, f(cap), f(jnp.inf))
    top_lo = jnp.where(large, f(lo_cap), f(jnp.inf))
    hi = jnp.clip(d_hi * down, -top, top)
    lo = jnp.clip(d_lo * down, -top_lo, top_lo)
    return hi, lo, c * jnp.where(small, f(k), jnp.where(large, f(1 / k), f(1)))


def unflush(a: Array, b: Array) -> tuple[Array, Array]:
    """The factors of a product ``a b`` rescaled by exact powers of two so that no
    partial product of a split product of them is subnormal (XLA flushes those
    to 0, losing up to ``2**-11`` of the product): where ``|a| < 2**-60``,
    ``(a 2**64, b 2**-64)``; else where ``|b| < 2**-60``, ``(a 2**-64, b 2**64)``;
    else unchanged. The product is the same real number unless both factors are
    that small (then ``|a b| < 2**-120``). Per element; for one factor per row and
    a gap, see :func:`balance`."""
    f = a.dtype.type
    tiny = f(2.0**-60)
    up = jnp.where(jnp.abs(a) < tiny, f(2.0**64), jnp.where(jnp.abs(b) < tiny, f(2.0**-64), f(1)))
    return a * up, b / up


# ----------------------------------------------------------------------------- double-float
#
# A double-float is a pair ``(hi, lo)`` of floats with ``|lo| <= ulp(hi) / 2``:
# about twice the working precision (48 bits in float32).


def fast_two_sum(hi: Array, lo: Array) -> tuple[Array, Array]:
    """Renormalises ``hi + lo`` (``|hi| >= |lo|``) into a double-float."""
    s = hi + lo
    return s, lo - (s - hi)


def dd_add(ah: Array, al: Array, bh: Array, bl: Array) -> tuple[Array, Array]:
    """Double-float sum: within ``~2u**2 (|a| + |b|)`` of ``a + b``."""
    s, e = two_sum(ah, bh)
    return fast_two_sum(s, e + (al + bl))


def dd_mul(ah: Array, al: Array, bh: Array, bl: Array) -> tuple[Array, Array]:
    """Double-float product: within ``~3u**2 |a b|`` of ``a b``."""
    p, e = two_prod(ah, bh)
    return fast_two_sum(p, e + (ah * bl + al * bh))


def dd_le(ah: Array, al: Array, bh: Array, bl: Array) -> Array:
    """``a <= b`` for normalised double-floats."""
    return (ah < bh) | ((ah == bh) & (al <= bl))


def dd_lt(ah: Array, al: Array, bh: Array, bl: Array) -> Array:
    """``a < b`` for normalised double-floats."""
    return (ah < bh) | ((ah == bh) & (al < bl))


def _dd_combine(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    return dd_add(a[0], a[1], b[0], b[1])


def dd_sum(hi: Array, lo: Array, axis: int) -> tuple[Array, Array]:
    """Double-float sum along ``axis``: one variadic reduction whose combiner is
    :func:`dd_add`, within about ``m u**2`` of exact for ``m`` non-negative terms in
    whatever order XLA combines them."""
    zero = jnp.zeros((), hi.dtype)
    return jax.lax.reduce((hi, lo), (zero, zero), _dd_combine, (axis,))


def exp_small(x: Array) -> Array:
    """``exp(x)`` for a small remainder ``|x| <= 0.4`` by its Taylor polynomial (Horner;
    degree 8 in float32, 17 in float64, truncation below 0.02u), where a kernel
    computes a weight as ``exp(big) * exp(small)``.

    Not ``jnp.exp``: XLA's algebraic simplifier rewrites ``exp(a) * exp(b)`` into
    ``exp(a + b)``, which rounds ``a + b`` and undoes the split that makes the
    product exact to a few ulp (measured: 65u relative at a logit of -87 on
    XLA:CPU, for the 6u the kernels state). The polynomial is within 1.07u of
    ``exp`` on ``[-0.4, 0.4]`` in float32 (``tests/test_descent.py`` checks 2u
    on a dense grid), no worse than the backend's ``exp`` (1.39u). Arguments are
    clamped to ``[-1, 1]``, so that any input gives a finite value (callers pass
    larger remainders only where ``exp(big)`` is 0).
    """
    f = x.dtype.type
    degree = 17 if x.dtype == jnp.float64 else 8
    x = jnp.clip(x, f(-1), f(1))
    t = jnp.full_like(x, 1 / math.factorial(degree))
    for k in range(degree - 1, -1, -1):
        t = f(1 / math.factorial(k)) + x * t
    return t
