r"""Joint exponential mechanism for top-k (Gillenwater, Joseph, Muñoz Medina &
Ribero, ICML 2022), sampled exactly over ordered k-tuples.

With the scores sorted, ``c_(1) >= ... >= c_(n)``, a sequence ``s`` of k
distinct outcomes has error ``E(s) = max_i (c_(i) - c_{s_i}) >= 0`` and is drawn
with probability ``∝ exp(-ε E(s) / (2 Δ_u))``. There are n!/(n-k)! sequences,
but only k·n possible errors ``E_ij = c_(i) - c_(j)``: the paper's sampler
groups the sequences by the pair (i, j) where their error is attained, draws a
pair with probability ∝ (number of sequences in the group) × exp(-ε E_ij /
(2Δ_u)), then a sequence uniformly inside the group.

The groups. Let ``i`` be the *first* position whose error equals ``E(s)`` and
``j`` the item there. Then every earlier position ``p < i`` holds an item with
error ``< E`` and every later one an item with error ``<= E``. Those item sets
``A_p = {l: c_(p) - c_(l) < E}`` (``p < i``) and ``{l: c_(p) - c_(l) <= E}``
(``p > i``) grow with ``p`` and ``j`` is in none of the earlier ones, so the
group has exactly ``prod_{p != i} (|A_p| - (p - 1))`` members (positions counted
from 1), and drawing one uniformly is: for ``p = 1..k``, ``p != i``, one item
uniformly from ``A_p`` minus the items already placed. Every sequence is in
exactly one group, so this samples the joint law exactly. Errors are compared
as computed (``c_(p) - c_(l)`` in the compute dtype), which is monotone in both
scores, so the grouping is exact for the errors the code uses, ties included.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import checkify

from . import _checks, _logits, _rows, _sampling, _top_k
from ._typing import Array, ArrayLike, PRNGKey

_NEG_INF = -jnp.inf


def joint_top_k(
    key: PRNGKey,
    scores: ArrayLike,
    k: int,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
) -> Array:
    r"""Selects an ordered k-tuple in one ε-DP draw with the joint exponential mechanism.

    .. math::

        P(s) \propto \exp\Big(-\frac{\varepsilon}{2\Delta_u}
        \max_{i \le k}\big(c_{(i)} - c_{s_i}\big)\Big),

    over sequences ``s`` of k distinct outcomes, ``c_(i)`` the i-th largest
    score, ``Δ_u = sensitivity`` if ``monotonic`` else ``2 * sensitivity``.
    Sampled exactly by grouping sequences by the position and item where their
    error is attained (Gillenwater et al. 2022; see the module notes): one
    categorical draw over the k·n groups, then k - 1 uniform draws. Unlike
    :func:`jaxdp.top_k` (k peeling rounds at ε/k), the whole budget goes to one
    draw, which is much more accurate when the top counts are well separated
    from the rest.

    **Privacy.** ε-DP for add/remove neighbours (McSherry & Talwar 2007, Thm 6):
    if every score moves by at most Δ, then ``c_(i)`` (an order statistic) and
    ``c_{s_i}`` each move by at most Δ, so the error ``max_i(c_(i) - c_{s_i})``
    moves by at most 2Δ; if all scores move in the same direction
    (``monotonic``, e.g. counts when one user is added), both terms move the same
    way and the error moves by at most Δ. This is the paper's Lemma for counts
    (Δ = 1, monotonic: Δ_u = 1).

    **Finite precision.** Both choices go through the categorical kernel
    (``jaxdp._sampling.categorical``), so each draw inherits its (ε', δ') from
    ``SECURITY.md`` ("The categorical kernel"), for the first choice over k·n
    groups and for each of the k - 1 uniform choices. What this function adds:
    a group's log-weight is ``-ε E / (2Δ_u)`` (one product, one division: 2
    ulps) plus a sum of k - 1 logarithms of integers at most n (1 ulp each, k
    roundings of the sum), so with ``u = 2**-24`` (float32) its absolute error
    is at most ``u (2 |ε E / 2Δ_u| + 2k ln n)``. For groups of probability above
    ``δ'`` (``|ε E/2Δ_u| <= 40 + k ln n``) and k = 10, n = 10**4, that is about
    5e-5, and the privacy loss moves by at most twice that, ``ε' <= ε + 1e-4``
    before the kernel's own term (1e-13 under ``jax.enable_x64``). Errors are
    the differences ``c_(i) - c_l`` as computed; their rounding (half an ulp of
    the difference) adds at most that much to Δ_u. Integer scores below 2**24
    are exact.

    Args:
      key: a PRNG key (typed or legacy); one key per call.
      scores: ``[..., n, ...]`` real array; ``-inf`` is never selected.
      k: static int, ``1 <= k <= n``.
      epsilon: ε > 0 for the whole tuple; number or array broadcasting with the
        batch shape; may be traced.
      sensitivity: Δ > 0, the largest change of any score between neighbours;
        same rules.
      monotonic: static bool; see **Privacy**.
      shape: static draw shape with :func:`jax.random.categorical` semantics.
      axis: static int, the axis of outcomes.

    Returns:
      int32 array of ``shape + (k,)``: distinct indices along ``axis``, position
      ``i`` estimating the i-th largest score. Under tracing, invalid rows (NaN or
      +inf scores, fewer than k finite scores, ε or Δ not finite and > 0) give
      -1; ``checkify`` reports why.

    Raises:
      ValueError: bad ε, Δ, scores, ``shape``, ``axis`` or key; k not an int in
        [1, n]; ``monotonic`` not a bool; a concrete row with fewer than k
        finite scores.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> jaxdp.joint_top_k(jax.random.key(0), jnp.arange(10.0), 3, epsilon=1.0,
      ...                   sensitivity=1.0, shape=(100,)).shape
      (100, 3)

    References:
      J. Gillenwater, M. Joseph, A. Muñoz Medina and M. Ribero, `A Joint
      Exponential Mechanism for Differentially Private Top-k
      <https://arxiv.org/abs/2201.12333>`_, ICML 2022.
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "joint_top_k"
    if not isinstance(monotonic, bool):
        raise ValueError(f"{fn}: monotonic must be a bool, got {monotonic!r}")
    key, scores, epsilon, sensitivity, shape, k = _top_k.top_k_args(
        fn, key, scores, k, epsilon, sensitivity, shape, axis
    )
    return _joint_top_k_impl(
        key, scores, epsilon, sensitivity, k=k, monotonic=monotonic, shape=shape
    )


def _group_logits(c_sorted: Array, scale: Array, k: int) -> tuple[Array, Array]:
    """For one row of descending scores: (errors ``(k, n)``, group logits ``(k, n)``)."""
    n = c_sorted.shape[-1]
    dtype = c_sorted.dtype
    # err[p, l] = c_(p) - c_(l): non-decreasing in l; +inf for -inf scores
    err = c_sorted[:k, None] - c_sorted[None, :]
    err = jnp.where(jnp.isnan(err), jnp.inf, err)
    flat_e = err.reshape(-1)  # the group (i, j) has error err[i, j]
    pos = jnp.arange(k)

    def add_position(total, p):
        row = err[p]
        below = jnp.searchsorted(row, flat_e, side="left").reshape(k, n)
        upto = jnp.searchsorted(row, flat_e, side="right").reshape(k, n)
        count = jnp.where(p < pos[:, None], below, upto) - p
        term = jnp.where(count > 0, jnp.log(jnp.maximum(count, 1).astype(dtype)), _NEG_INF)
        return total + jnp.where(p == pos[:, None], 0.0, term), None

    logcount, _ = jax.lax.scan(add_position, jnp.zeros((k, n), dtype), pos)
    finite = jnp.isfinite(err)
    logits = jnp.where(finite, logcount - scale * jnp.where(finite, err, 0), _NEG_INF)
    return err, logits


@partial(jax.jit, static_argnames=("k", "monotonic", "shape"))
def _joint_top_k_impl(key, scores, epsilon, sensitivity, *, k, monotonic, shape):
    fn = "joint_top_k"
    scores = _logits.float_scores(scores)
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    checkify.debug_check(
        jnp.all(jnp.sum(scores > -jnp.inf, axis=-1) >= k),
        f"{fn}: every row of scores needs at least k={k} finite scores",
    )
    n = scores.shape[-1]
    dtype = scores.dtype
    batch = _rows.broadcast_batch(scores.shape[:-1], epsilon.shape, sensitivity.shape)
    num_lead, tail = _rows.split_shape(shape, batch)
    rows = math.prod(tail)
    valid = _logits.row_valid(jnp.max(scores, axis=-1), epsilon, sensitivity)
    valid = valid & (jnp.sum(scores > -jnp.inf, axis=-1) >= k)
    valid = jnp.broadcast_to(valid, tail).reshape(rows)

    c = _rows.flatten_rows(scores, tail)  # (R, n)
    order = jnp.argsort(-c, axis=-1, stable=True)
    c_sorted = jnp.take_along_axis(c, order, axis=-1)
    delta_u = sensitivity if monotonic else 2 * sensitivity
    scale = jnp.broadcast_to(epsilon / (2 * delta_u), tail).reshape(rows).astype(dtype)
    err, logits = jax.vmap(partial(_group_logits, k=k))(c_sorted, scale)  # (R, k, n)

    key_group, key_fill = jax.random.split(key)
    draw_shape = (num_lead, rows)
    group = _sampling.categorical(key_group, logits.reshape(rows, k * n), draw_shape)
    ok = group >= 0
    group = jnp.maximum(group, 0)
    gi, gj = group // n, group % n  # position of the max and its item (sorted index)
    rows_idx = jnp.arange(rows)[None, :]
    e_max = err[rows_idx, gi, gj]  # (S, R)
    items = jnp.arange(n)

    def fill(used, xs):
        p, kp = xs
        row_err = err[:, p, :]  # (R, n)
        strict = row_err[None] < e_max[..., None]
        loose = row_err[None] <= e_max[..., None]
        allowed = jnp.where((p < gi)[..., None], strict, loose) & ~used
        pick = _sampling.categorical(kp, jnp.where(allowed, 0.0, _NEG_INF), draw_shape)
        here = jnp.where(p == gi, gj, pick)
        ok_p = (p == gi) | (pick >= 0)
        used = used | (items[None, None, :] == here[..., None])
        return used, (here, ok_p)

    used0 = items[None, None, :] == gj[..., None]
    keys = jax.random.split(key_fill, k)
    _, (picked, ok_fill) = jax.lax.scan(fill, used0, (jnp.arange(k), keys))
    picked = jnp.moveaxis(picked, 0, -1)  # (S, R, k) sorted indices
    ok = ok & jnp.all(jnp.moveaxis(ok_fill, 0, -1), axis=-1) & valid[None, :]
    out = jnp.take_along_axis(order[None], jnp.clip(picked, 0, n - 1), axis=-1)
    out = jnp.where(ok[..., None], out, -1).astype(jnp.int32)
    return out.reshape(shape + (k,))
