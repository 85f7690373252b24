r"""Several private quantiles in one ε-DP draw: the joint exponential mechanism.

Gillenwater, Joseph & Kulesza (ICML 2021) release m quantiles at once by one
exponential mechanism over *sorted* m-tuples ``o_1 <= ... <= o_m`` in
``[a, b]``. With the data clipped and sorted, ``x_(0) = a <= x_(1) <= ... <=
x_(n) <= x_(n+1) = b``, the ``N = n + 1`` intervals ``I_i = [x_(i), x_(i+1))``
hold the points with exactly ``i`` data points below them. An output whose
quantile ``j`` lies in ``I_{i_j}`` has utility

.. math::

    u(o) = -\sum_{j=1}^{m+1} \big| (i_j - i_{j-1}) - g_j n \big|,\qquad
    i_0 = 0,\ i_{m+1} = n,\ g_j = q_j - q_{j-1}\ (q_0 = 0,\ q_{m+1} = 1),

and density :math:`\propto \exp(\varepsilon u(o) / (2\Delta))`. A tuple of
interval indices ``i_1 <= ... <= i_m`` has mass
:math:`e^{\varepsilon u / 2\Delta}\prod_{\text{runs}} L_i^r / r!` (a run of r
quantiles in one interval of length L covers the sorted simplex of volume
``L**r / r!``); given the indices the points are uniform in their intervals,
then sorted.

The dynamic programme. ``α_j(i, r)`` is the log-mass of the ways to place
quantiles ``1..j`` with ``i_j = i`` and exactly the last ``r`` of them in
``I_i``; it obeys

.. math::

    α_1(i, 1) = \log L_i + φ_1(i),\quad
    α_j(i, 1) = \log L_i + \operatorname{LSE}_{i' < i} \big[\hat α_{j-1}(i')
        + φ_j(i - i')\big],\quad
    α_j(i, r) = α_{j-1}(i, r-1) + φ_j(0) + \log L_i - \log r,

with :math:`φ_j(d) = -\frac{\varepsilon}{2\Delta}|d - g_j n|` and
:math:`\hat α = \operatorname{LSE}_r α`. The convolution over ``i' < i`` is
split at the kink of ``φ_j`` (``d = ⌊g_j n⌋``): the far part is a discounted
prefix log-sum-exp, the near part a window of fixed width, which blocks of that
width turn into one suffix and one prefix inside blocks. All are first-order
linear recurrences ``x ← b ⊕ (x + a)`` in the log semiring, evaluated by
``jax.lax.associative_scan``: O(m n log n) for the transitions (the paper's FFT
speed-up has the same order but loses every entry below 1e-16 of the row
maximum; this is exact in log space) plus O(m² n) for the run lengths. Sampling
walks back from quantile m: the interval ``i' < i`` of the next run and its
length ``r`` by one categorical draw over the pairs, O(m² n) per draw.

Every quantity is kept relative to its level's maximum (each level ``j`` is
shifted by its own constant; sampling at level ``j`` only uses ratios within
it), so the log-values that matter are small and their rounding is relative,
never a cancellation of large numbers: the targets ``g_j n`` are carried as an
exact integer part and a fraction (from Dekker's exact products, with ``n``
itself never rounded), and ``d - g_j n`` as the exact integer ``d - ⌊g_j n⌋``
minus that fraction, so it is accurate at any n in float32, above ``2**24``
included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import _cell, _checks, _logits, _rows, _sampling, _tracing
from . import _twofloat as _tf
from ._continuous import _pair
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

_NEG_INF = -jnp.inf


# ----------------------------------------------------------------------------- exact targets


def _targets(g: Array, n: int) -> tuple[Array, Array]:
    """The targets ``t = g n`` for float ``g`` in [0, 1] and a static ``n < 2**30``, as
    ``(⌊t⌋, t - ⌊t⌋)``: the integer part exact (int32), the fraction in [0, 1]
    within ``6u`` absolute.

    ``g n`` is the exact sum of four floats (``n = n_h + n_l`` with ``n_h`` its
    rounding, both exact; Dekker's product of ``g`` with each). The integer and
    fractional parts of each are exact; only the sum of the four fractions (in
    [0, 4)) rounds, three times by at most ``2u`` each. ``n`` itself is never
    rounded: in float32 above ``2**24`` it would move the targets by up to
    ``g ulp(n) / 2`` between neighbours (an integer or more), which the
    sensitivity does not cover.
    """
    dtype = g.dtype
    n_h = dtype.type(n)
    n_l = dtype.type(n - int(n_h))  # an integer below 2**7: exact
    whole = jnp.zeros(g.shape, jnp.int32)
    frac = jnp.zeros(g.shape, dtype)
    for part in (*_tf.two_prod(g, n_l), *_tf.two_prod(g, n_h)):
        fl = jnp.floor(part)
        whole = whole + fl.astype(jnp.int32)
        frac = frac + (part - fl)  # part - ⌊part⌋ is exact
    carry = jnp.floor(frac)
    return whole + carry.astype(jnp.int32), frac - carry


def _gap(d: Array, whole: Array, frac: Array) -> Array:
    """``|d - t|`` for int32 ``d`` and a target ``t = whole + frac`` from :func:`_targets`:
    ``d - whole`` is exact in int32 and its float has a relative error of at most
    ``u``, so the result is within ``2u`` relative plus ``frac``'s own error."""
    return jnp.abs((d - whole).astype(frac.dtype) - frac)


# ----------------------------------------------------------------------------- log-semiring scans


def _logaddexp(a: Array, b: Array) -> Array:
    """``jnp.logaddexp`` (the same formula, the same values), but ``-inf`` for two
    ``-inf`` without computing ``-inf - -inf``: checkify's nan_checks reports the
    NaN that ``jnp.logaddexp`` forms on the way, though it never returns it."""
    top = jnp.maximum(a, b)
    live = top > _NEG_INF
    zero = jnp.zeros_like(top)
    gap = jnp.abs(jnp.where(live, a, zero) - jnp.where(live, b, zero))
    return top + jnp.log1p(jnp.exp(-gap))


def _affine_scan(b: Array, a: Array) -> Array:
    """``x_p = b_p ⊕ (x_{p-1} + a_p)``, ``x_{-1} = -inf``, along the last axis.

    ``⊕`` is ``logaddexp``; ``a_p = -inf`` restarts the recurrence at ``p``.
    A Hillis-Steele scan: ⌈log2 n⌉ rounds, each composing every map
    ``x ↦ B ⊕ (x + A)`` with the one ``2**k`` places before it (one shift, one
    fused elementwise pass; a ``fori_loop``, so the compiled size does not grow
    with n). Entries are sums of non-positive terms and log-sum-exps, so every
    output is within a few ulps per round of its exact value, with no
    cancellation.
    """
    n = b.shape[-1]
    rounds = max(1, math.ceil(math.log2(max(n, 2))))
    pos = jnp.arange(n, dtype=jnp.int32)

    def body(k, carry):
        acc_a, acc_b = carry
        shift = jnp.left_shift(1, k)
        has = pos >= shift
        prev_a = jnp.where(has, jnp.roll(acc_a, shift, axis=-1), 0.0)
        prev_b = jnp.where(has, jnp.roll(acc_b, shift, axis=-1), _NEG_INF)
        return prev_a + acc_a, _logaddexp(acc_b, prev_b + acc_a)

    _, x = jax.lax.fori_loop(jnp.int32(0), jnp.int32(rounds), body, (a, b))
    return x


def _transition(hat: Array, s: Array, big_t: Array, frac: Array) -> Array:
    r"""``LSE_{i' < i} [hat(i') - s |i - i' - t|]`` for every ``i`` (last axis), exactly.

    ``d = i - i' >= 1``, ``t = big_t + frac`` (:func:`_targets`). Split at
    ``T = ⌊t⌋``: for ``d >= T + 1`` the weight is ``e^{-s(d - t)}``, a
    discounted prefix sum; for ``1 <= d <= T`` it is ``e^{-s(t - d)}``, a window
    ``[i - T, i - 1]``, the suffix of one block of width ``T`` plus the prefix of
    the next.
    """
    n_int = hat.shape[-1]
    i = jnp.arange(n_int, dtype=jnp.int32)
    dtype = hat.dtype
    neg_s = jnp.full(hat.shape, -s, dtype)
    width = jnp.maximum(big_t, 1)
    pos = i % width
    starts = pos == 0
    ends = (pos == width - 1) | (i == n_int - 1)
    # The three scans (the far part's, the near part's prefix and suffix) in one loop
    # over a (3, N) stack: a third of the sequential steps, the same values.
    q, prefix_scan, suffix_rev = _affine_scan(
        jnp.stack([hat, hat - s * pos.astype(dtype), hat[::-1]]),
        jnp.stack([neg_s, jnp.where(starts, _NEG_INF, 0.0), jnp.where(ends[::-1], _NEG_INF, -s)]),
    )
    suffix_scan = suffix_rev[::-1]
    # far part: d >= T + 1, -s (d - t) = -s (i - T - 1 - i') - s (1 - frac)
    p2 = i - big_t - 1
    far = jnp.where(p2 >= 0, q[jnp.clip(p2, 0, n_int - 1)] - s * (1 - frac), _NEG_INF)
    # near part: 1 <= d <= T, -s (t - d) = -s (i' - w) - s frac, w = i - T
    w = i - big_t
    suffix = jnp.where(w >= 0, suffix_scan[jnp.clip(w, 0, n_int - 1)], _NEG_INF)
    c = jnp.where(w >= 0, (w // width + 1) * width, 0)
    p = i - 1
    prefix = jnp.where(
        (p >= c) & (p >= 0),
        prefix_scan[jnp.clip(p, 0, n_int - 1)] - s * (c - w).astype(dtype),
        _NEG_INF,
    )
    near = jnp.where(big_t >= 1, _logaddexp(suffix, prefix) - s * frac, _NEG_INF)
    return _logaddexp(far, near)


def _normalise(x: Array) -> Array:
    top = jnp.max(x)
    return x - jnp.where(jnp.isfinite(top), top, 0)


def _forward(log_len: Array, s: Array, big_t: Array, frac: Array) -> Array:
    """The table ``α_j(i, r)`` ``(m, N, m)`` for one row, each level max-shifted to 0;
    the targets ``g_j n = big_t + frac`` (:func:`_targets`)."""
    n_int = log_len.shape[0]
    m = big_t.shape[0] - 1
    i = jnp.arange(n_int, dtype=jnp.int32)
    first = log_len - s * _gap(i, big_t[0], frac[0])
    level = jnp.full((n_int, m), _NEG_INF, log_len.dtype).at[:, 0].set(first)
    level = _normalise(level)
    log_r = jnp.log(jnp.arange(2, m + 1, dtype=log_len.dtype))

    def step(prev, target):
        whole, part = target
        hat = jax.nn.logsumexp(prev, axis=-1)
        new_one = log_len + _transition(hat, s, whole, part)
        t = whole.astype(log_len.dtype) + part
        runs = prev[:, :-1] + (log_len[:, None] - s * t) - log_r[None, :]
        nxt = _normalise(jnp.concatenate([new_one[:, None], runs], axis=-1))
        return nxt, nxt

    _, rest = jax.lax.scan(step, level, (big_t[1:m], frac[1:m]))
    return jnp.concatenate([level[None], rest], axis=0)


# ----------------------------------------------------------------------------- guarantee


def guarantee(
    n: int, m: int, epsilon: float, bounds: tuple[float, float], dtype=np.float32
) -> tuple[float, float]:
    """The (ε', δ') of one draw of :func:`private_quantiles` for ``n`` data points of
    ``dtype``, ``m`` quantiles and ``bounds`` (the table and the walk run in float64,
    ``u = 2**-53``; ``SECURITY.md``, "Finite precision: joint quantiles").

    * Every finite table entry ``v`` (relative to its level's maximum) obeys ``|v| <=
      V = 2 s n + m (Λ + ln(N m) + ln m)``: a partial walk's gaps sum to at most
      ``Σ d_k + Σ g_k n <= 2n`` (``s = ε / (2Δ) <= ε / 2``, as ``Δ >= 1``), its
      log-lengths span at most ``Λ = ln((hi - lo) / t)`` each (``t`` the least
      positive difference of two values of ``dtype``), the run lengths ``ln m!``
      and the entry is a sum over at most ``(N m)**m`` partial walks. So each is
      within ``e_t = (V + ln N) c u`` of the exact log-sum-exp of the entries below
      it (``c = 4 ceil(log2 N) + 12``: the scans' rounds).
    * Each choice's logits ``α + φ`` round twice more (the sum, and the kernel's
      shift by the row maximum: ``2u (V + s n)``), the gap ``|d - g n|`` is within
      ``2u n + 6u`` and its product with ``s`` rounds (``s u (3n + 6)`` in all), and
      each placed quantile's log-length ``2u (L + 1)`` with ``L = max(|ln(hi -
      lo)|, |ln t|)``. The scale is ``ε (1 - 2**-23) / (2Δ)``, below ε's own float32
      rounding, so no term for ε.
    * The categorical kernel, in float64, adds ``ε_k - ε`` and ``δ_k`` per choice
      (:func:`jaxdp._descent.guarantee` over the ``N m`` pairs, weights given).

    A walk makes at most ``m`` choices, each a ratio of such entries, so ``ε' = ε +
    4m (e_t + e_l) + 4m u (L + 1) + m (ε_k - ε)`` and ``δ' = m δ_k``.
    """
    from . import _descent

    u = 2.0**-53
    n_int = n + 1
    s = epsilon / 2
    tiny = float(np.finfo(dtype).smallest_subnormal)
    span = float(bounds[1]) - float(bounds[0])
    lam = math.log(span) - math.log(tiny)
    big_l = max(abs(math.log(span)), -math.log(tiny))
    v = 2 * s * n + m * (lam + math.log(n_int * m) + math.log(m))
    c = 4 * math.ceil(math.log2(max(n_int, 2))) + 12
    e_table = (v + math.log(n_int)) * c * u
    e_logit = 2 * u * (v + s * n) + s * u * (3 * n + 6)
    eps_k, delta_k = _descent.guarantee(n_int * m, epsilon, np.float64, recomputed=False)
    eps = epsilon + 4 * m * (e_table + e_logit) + 4 * m * u * (big_l + 1) + m * (eps_k - epsilon)
    return eps, m * delta_k


# ----------------------------------------------------------------------------- public


def private_quantiles(
    key: PRNGKey,
    data: ArrayLike,
    qs: ArrayLike,
    *,
    epsilon: ArrayLike,
    bounds: tuple[float, float] | ArrayLike,
    shape: Sequence[int] | None = None,
) -> Array:
    r"""Releases m quantiles in one ε-DP draw with the joint exponential mechanism.

    .. math::

        p(o_1 \le \dots \le o_m) \propto \exp\Big(-\frac{\varepsilon}{2\Delta}
        \sum_{j=1}^{m+1}\big|\#\{i: o_{j-1} \le x_i < o_j\} - (q_j - q_{j-1})\,n\big|\Big),

    over sorted tuples in ``bounds`` = [a, b] (``o_0 = a``, ``o_{m+1} = b``,
    ``q_0 = 0``, ``q_{m+1} = 1``), the data clipped to the bounds. Sampled exactly
    (Gillenwater, Joseph & Kulesza 2021): a dynamic programme in log space over
    the intervals between sorted data points gives the law of the intervals
    holding the quantiles; each is then a uniform point in its interval, and the
    tuple is sorted. Ties are zero-length intervals (never drawn); empty data
    gives m sorted uniform points in ``bounds`` (the utility is then 0). Cost per
    row: one sort, O(m n log n + m² n) for the table (memory O(m² n)), then
    O(m² n) time and float64 memory per draw (one categorical choice per run). See the
    module notes for the recurrences.

    **Privacy.** Neighbours add or remove one record. The record falls in one gap
    ``j*``, whose count moves by 1 and whose target moves by ``g_{j*} = q_{j*} -
    q_{j*-1}``, so that term moves by at most ``1 - g_{j*}``; every other term
    moves by at most its ``g_j`` (the target only), and those sum to ``1 -
    g_{j*}``. So the utility has sensitivity

    .. math:: \Delta = 2\,(1 - \min_j g_j) \le 2,

    as in the paper's add/remove analysis (its code, ``dp_multiq``, uses the same
    constant), and each draw is ε-DP (McSherry & Talwar 2007, Thm 6, with
    Lebesgue measure on the sorted simplex). Clipping to public ``bounds`` is a
    per-record map and costs nothing. For **m = 1** the two gap terms are equal,
    ``|c - q n| + |(n - c) - (1 - q) n| = 2 |c - q n|`` with ``c = #{x_i < o}``, and
    ``Δ = 2 max(q, 1 - q)``, so the density is
    ``∝ exp(-ε |c - q n| / (2 max(q, 1 - q)))``: exactly
    :func:`jaxdp.private_quantile` with its tight add/remove sensitivity.

    **Finite precision.** The log-lengths, the table and the walk run in float64
    (inside ``jax.enable_x64``, whatever the global flag; the output has the
    data's dtype). In float32 they could not meet the per-draw target of
    ``ε + 1e-5``: each table entry is a log-sum-exp built by scans of
    ⌈log2(n+1)⌉ rounds, off by a few ulps *of the entry's size* per round, and a
    walk makes up to m choices, each through the categorical kernel with its own
    term, so the bound was ``ε + 1.2e-2`` and ``δ' = 5.1e-10`` at n = 10**6, m =
    10. In float64 (``u = 2**-53``), ``jaxdp._quantiles.guarantee`` states
    the bound (derived in ``SECURITY.md``, "Finite precision: joint
    quantiles"): every finite entry lies within ``V = 2 s n + m (Λ + ln(N m) +
    ln m)`` of its level's maximum (along a partial walk the gaps ``|d_k - g_k
    n|`` sum to at most ``2n``; ``s = ε / (2Δ) <= ε/2``; ``Λ`` the span of the
    log-lengths, at most ``ln((hi - lo) / 2**-149)`` for float32 data) and
    within ``(V + ln N) c u`` of the exact log-sum-exp of its inputs (``c =
    4⌈log2 N⌉ + 12``); a walk's probability is a product of at most m ratios of
    entries, each also rounding its logits once; the float64 kernel adds
    ``_descent.guarantee(N m, ε, float64)``'s term per choice. At ε = 1: ``ε +
    1.0e-10`` (n = 10**3, m = 3), ``ε + 4.3e-7`` (n = 10**6, m = 10), and ``δ'
    <= 5e-22``. The ε term grows as ``ε n m``: it reaches ``1e-5`` near ``ε n m
    = 2.4e8`` (ε = 24 at n = 10**6, m = 10). The price is time: 1.7–2.0× the
    float32 walk's on XLA:CPU (the table and every choice). The targets ``g_j = q_j -
    q_{j-1}`` are rounded once from ``qs`` (in float64; exact unless the two
    are 29 binades apart); the sensitivity is computed from those ``g_j``.

    The uniform point inside each interval is drawn as a float cell with its
    exact mass, up to a total variation of ``2e-21`` per point in float32
    (:mod:`jaxdp._cell`, ``SECURITY.md``, "The point inside"), which adds
    ``2e-21 m (1 + e^ε')`` to δ'.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      data: ``[..., n]`` real (``±inf`` beyond the bounds, clipped like any such
        value); ``n = 0`` (empty data) is allowed.
        Values outside ``bounds`` are **clipped** to them. Leading dims are a
        batch of datasets. Traced or concrete.
      qs: ``[m]``, ``m >= 1``, non-decreasing, in ``[0, 1]``; may be traced.
        Output ``[..., j]`` estimates ``qs[j]``.
      epsilon: ε > 0, number or array broadcasting with the data's batch shape;
        may be traced (``vmap`` over an ε grid compiles once).
      bounds: the public pair ``(lo, hi)``, finite, ``lo < hi``.
      shape: static draw shape as in :func:`jax.random.categorical` (it ends
        with dims the batch shape broadcasts to; leading dims are i.i.d. draws).

    Returns:
      Float array (float32, float64 under x64) of ``shape + (m,)``, sorted along
      the last axis, in ``[lo, hi]``. Under tracing, invalid rows (non-finite
      data, ``qs`` outside [0, 1] or unsorted, a bad ``bounds``, ε not finite
      and > 0) give NaN; ``checkify`` reports why.

    Raises:
      ValueError: NaN data; scalar data; ``qs`` not a non-empty 1-D
        array in [0, 1], non-decreasing; ``bounds`` not a finite pair with
        ``lo < hi``; a concrete ε not finite and > 0; a bad ``shape``; a batched
        key.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> data = jnp.arange(1000.0)
      >>> o = jaxdp.private_quantiles(jax.random.key(0), data, jnp.array([0.25, 0.5, 0.75]),
      ...                             epsilon=1.0, bounds=(0.0, 1000.0), shape=(100,))
      >>> o.shape, o.dtype, bool((jnp.diff(o, axis=-1) >= 0).all())
      ((100, 3), dtype('float32'), True)

    References:
      J. Gillenwater, M. Joseph and A. Kulesza, `Differentially Private Quantiles
      <https://arxiv.org/abs/2102.08244>`_, ICML 2021.
      A. Smith, `Privacy-preserving Statistical Estimation with Optimal Convergence
      Rates <https://doi.org/10.1145/1993636.1993743>`_, STOC 2011.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "private_quantiles"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, epsilon=epsilon)
    bounds = _pair(bounds, fn, "bounds")
    data = _checks.data_array(data, fn, "data")
    if data.ndim == 0:
        raise ValueError(f"{fn}: data must be an array [..., n], got a scalar")
    qs = _checks.float_array(qs, fn, "qs", allow_neg_inf=False)
    if qs.ndim != 1 or qs.shape[0] == 0:
        raise ValueError(f"{fn}: qs must be a non-empty 1-D array [m], got shape {qs.shape}")
    if _checks.is_concrete(qs):
        q = np.asarray(qs, np.float64)
        if np.any((q < 0) | (q > 1)):
            raise ValueError(f"{fn}: qs must be in [0, 1], got {_checks._fmt(q)}")
        if np.any(np.diff(q) < 0):
            raise ValueError(f"{fn}: qs must be non-decreasing, got {_checks._fmt(q)}")
    epsilon = jnp.asarray(epsilon, _checks.compute_dtype())
    try:
        batch = _rows.broadcast_batch(data.shape[:-1], epsilon.shape)
    except ValueError as err:
        raise ValueError(
            f"{fn}: epsilon (shape {epsilon.shape}) must broadcast with the batch shape "
            f"{data.shape[:-1]} of the data"
        ) from err
    shape = _checks.draw_shape(shape, batch, fn, "data")
    return _quantiles_impl(key, data, qs, bounds, epsilon, shape=shape)


@partial(jax.jit, static_argnames=("shape",))
def _quantiles_impl(key, data, qs, bounds, epsilon, *, shape):
    fn = "private_quantiles"
    _checks.debug_check_positive(fn, epsilon=epsilon)
    lo, hi = bounds[0], bounds[1]
    bounds_ok = jnp.isfinite(lo) & jnp.isfinite(hi) & (lo < hi)
    data_ok = jnp.all(jnp.isfinite(data), axis=-1)
    qs_ok = jnp.all(jnp.isfinite(qs) & (qs >= 0) & (qs <= 1)) & jnp.all(jnp.diff(qs) >= 0)
    debug_check(bounds_ok, f"{fn}: bounds must be finite with lo < hi")
    debug_check(jnp.all(data_ok), f"{fn}: data must be finite")
    debug_check(qs_ok, f"{fn}: qs must be non-decreasing in [0, 1], got {{}}", qs)
    n = data.shape[-1]
    m = qs.shape[0]
    n_int = n + 1
    batch = _rows.broadcast_batch(data.shape[:-1], epsilon.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    rows = math.prod(tail)

    ordered = _rows.flatten_rows(jnp.sort(jnp.clip(data, lo, hi), axis=-1), tail)
    edges = jnp.concatenate(
        [jnp.broadcast_to(lo, (rows, 1)), ordered, jnp.broadcast_to(hi, (rows, 1))], axis=-1
    )
    key_walk, key_point = jax.random.split(key)
    # The interval indices are integers: no gradient flows into the float64 walk.
    walk_args = jax.lax.stop_gradient((edges, qs, epsilon))
    with jax.enable_x64(True):
        idx = _walk(key_walk, *walk_args, num_lead=num_lead, tail=tail)
    ok_idx = jnp.all(idx >= 0, axis=-1)
    idx = jnp.clip(idx, 0, n_int - 1)
    left = jnp.take_along_axis(edges[None], idx, axis=-1)
    right = jnp.take_along_axis(edges[None], idx + 1, axis=-1)
    points = _cell.point(key_point, left, right)
    points = jnp.sort(points, axis=-1)

    valid = bounds_ok & qs_ok & _rows.flatten_batch(data_ok, tail)
    valid = valid & _rows.flatten_batch(_logits.params_valid(batch, epsilon), tail)
    valid = valid[None, :] & ok_idx
    out = jnp.where(valid[..., None], points, jnp.nan)
    return out.reshape(shape + (m,))


def _walk(key, edges, qs, epsilon, *, num_lead, tail):
    """The interval indices ``(num_lead, rows, m)`` of the draws, in float64 (called
    inside ``jax.enable_x64``)."""
    work = jnp.float64
    rows, n_int = edges.shape[0], edges.shape[1] - 1
    n, m = n_int - 1, qs.shape[0]
    edges = edges.astype(work)
    log_len = jnp.log(jnp.maximum(edges[:, 1:] - edges[:, :-1], 0))
    cum = jnp.concatenate([jnp.zeros((1,), work), qs.astype(work), jnp.ones((1,), work)])
    gaps = jnp.clip(jnp.diff(cum), 0, 1)
    # sensitivity of the utility for the rounded gaps: sum(g) + 1 - 2 min(g)
    delta_u = jnp.sum(gaps) + 1 - 2 * jnp.min(gaps)
    big_t, frac = _targets(gaps, n)
    # ε / (2Δ) as a product (checkify's division check would meet a float64 division
    # after this enable_x64 has closed), rounded down past ε's own float32 rounding
    # (ε_32 <= ε (1 + 2**-24)) and the product's: the walk is never above ε.
    inv = jax.lax.reciprocal(2 * delta_u)
    scale = _rows.flatten_batch(epsilon.astype(work) * inv * (1 - 2.0**-23), tail)

    alpha = jax.vmap(_forward, in_axes=(0, 0, None, None))(log_len, scale, big_t, frac)
    # alpha: (rows, m, N, m) -> per level (m, rows, N, m)
    alpha = jnp.moveaxis(alpha, 1, 0)

    draw_shape = (num_lead, rows)
    i_grid = jnp.arange(n_int, dtype=jnp.int32)
    r_grid = jnp.arange(1, m + 1, dtype=jnp.int32)

    def step(carry, xs):
        i_cur, remaining = carry
        level, alpha_j, k = xs
        first = level == m - 1
        target = jnp.minimum(level + 1, m)
        whole, part = big_t[target], frac[target]
        ref = jnp.where(first, n, i_cur)  # (S, R)
        d = ref[..., None] - i_grid[None, None, :]  # (S, R, N)
        allowed = jnp.where(first, d >= 0, d >= 1)
        gap = _gap(d, whole, part)  # (S, R, N)
        # one joint choice of (interval, run length): alpha_j(i', r) + phi(ref - i')
        logits = alpha_j[None] - (scale[None, :, None] * gap)[..., None]
        runs_ok = r_grid[None, None, None, :] <= level + 1
        logits = jnp.where(allowed[..., None] & runs_ok, logits, _NEG_INF)
        flat = _sampling.categorical(k, logits.reshape(draw_shape + (n_int * m,)), draw_shape)
        i_new = jnp.where(flat >= 0, flat // m, -1)
        r_new = flat % m + 1
        need = remaining == 0
        i_out = jnp.where(need, i_new, i_cur)
        rem_out = jnp.where(need, r_new - 1, remaining - 1)
        return (i_out, rem_out), i_out

    levels = jnp.arange(m - 1, -1, -1, dtype=jnp.int32)
    keys = jax.random.split(key, m)
    init = (jnp.zeros(draw_shape, jnp.int32), jnp.zeros(draw_shape, jnp.int32))
    init = _tracing.varying_like(init, key, edges, qs, epsilon)  # shard_map
    _, idx = jax.lax.scan(step, init, (levels, alpha[::-1], keys))
    return jnp.moveaxis(idx[::-1], 0, -1)  # (S, R, m), quantile order
