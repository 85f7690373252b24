"""The exponential mechanism over a finite range (McSherry & Talwar 2007)."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp

from . import _checks, _kernels, _logits, _measure, _rows
from ._debug_check import debug_check
from ._typing import Array, ArrayLike, PRNGKey

_METHODS = ("auto", "gumbel", "inverse_cdf")


def exponential(
    key: PRNGKey,
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    shape: Sequence[int] | None = None,
    axis: int = -1,
    method: str = "auto",
    log_measure: ArrayLike | None = None,
) -> Array:
    r"""Draws outcomes with the exponential mechanism.

    .. math::

        \Pr[r] = \frac{\mu(r)\, \exp(\varepsilon\, s_r / (2\Delta))}
                      {\sum_{r'} \mu(r')\, \exp(\varepsilon\, s_{r'} / (2\Delta))}

    (:math:`\varepsilon s_r / \Delta` in the exponent when ``monotonic``), with
    the base measure :math:`\mu = \exp(\texttt{log\_measure})`, uniform
    (:math:`\mu = 1`) by default.

    **Privacy.** If every score changes by at most ``sensitivity`` = Δ between
    neighbouring datasets (add or remove one record), each draw is
    ε-differentially private (McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014,
    Thm 3.10). When ``monotonic=True`` the caller promises that all scores move in
    the same direction between neighbours (e.g. counts); then the factor
    ε / Δ keeps ε-DP (Dwork & Roth 2014, remark after Thm 3.10). Each draw of a
    batch (``shape``) is a separate ε-DP release: releasing S draws of one
    dataset costs S·ε under basic composition.

    **Base measure.** ``log_measure`` gives a prior weight μ(r) > 0 to each
    outcome (``-inf``: μ(r) = 0, never selected). McSherry & Talwar (2007)
    define the mechanism with a base measure, and their Thm 6 holds for any μ
    that does not depend on the data: μ(r) cancels in the ratio of the
    probabilities of r under two neighbours, so each draw stays ε-DP (ε/Δ with
    ``monotonic``) *provided μ is public and chosen without looking at the
    data*. A μ computed from the private dataset is not covered and can leak
    it (it is then part of the data, with its own sensitivity).

    Args:
      key: a PRNG key, ``jax.random.key(...)`` or legacy ``jax.random.PRNGKey(...)``.
        One key per call; use ``jax.vmap`` for batches of keys.
      scores: ``[..., n, ...]`` real array (any dtype; computed in float32, or
        float64 under ``jax_enable_x64``). ``-inf`` marks an outcome that is never
        selected. Traced or concrete.
      epsilon: privacy parameter ε > 0. Python number or array broadcasting with
        the batch shape (scores' shape without ``axis``); may be traced, so a
        study can ``vmap`` over an ε grid without recompiling.
      sensitivity: Δ > 0, the largest change of any score between neighbours.
        Same rules as ``epsilon``.
      monotonic: static bool; see **Privacy**.
      shape: static draw shape, as in :func:`jax.random.categorical`: it must end
        with dims the batch shape broadcasts to; leading dims are i.i.d. draws.
        ``None`` gives one draw per score row.
      axis: static int, the axis of outcomes.
      method: static, ``"gumbel"`` (argmax of logits plus Gumbel noise, one
        variate per candidate per draw, chunked to cache size),
        ``"inverse_cdf"`` (an ``exp`` and prefix sum once per row, then one
        uniform and an O(log n) search per draw), or ``"auto"`` (the faster one
        for the static sizes, as measured by ``python -m benchmarks``).
      log_measure: ``None`` (uniform) or a public, data-independent base measure
        as log-weights log μ(r): a real array that broadcasts against ``scores``
        in their own layout (numpy rules, ``axis`` included, e.g. ``(n,)`` for
        ``axis=-1`` or ``(n, 1)`` for ``axis=0`` of 2-d scores) without enlarging
        them. ``-inf`` excludes an outcome; NaN and ``+inf`` are invalid. It need
        not be normalised (only differences within a row matter). Computed in the
        scores' dtype; may be traced (``vmap`` over measures does not recompile).

    Returns:
      int32 array of ``shape`` with indices into ``axis``. Under tracing, a row
      with no valid draw (NaN or +inf scores or log-measure, no outcome with
      both a finite score and a finite log-measure, or ε, Δ not finite and > 0)
      returns -1 there; ``checkify`` reports why.

    Raises:
      ValueError: for a concrete ε or Δ that is not finite and > 0; NaN or +inf
        scores; a row of all ``-inf``; an empty outcome axis; a bad ``axis``,
        ``shape`` or ``method``; a batched key. For a concrete ``log_measure``:
        NaN or ``+inf``, a shape that does not broadcast against the scores, a
        row of all ``-inf``, or a row where no outcome has both a finite score
        and a finite log-measure (the message names ``log_measure``).

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp
      >>> draws = jaxdp.exponential(jax.random.key(0), jnp.arange(1000.0),
      ...                           epsilon=1.0, sensitivity=1.0, shape=(10**6,))
      >>> draws.shape, draws.dtype
      ((1000000,), dtype('int32'))

      A base measure: outcome 1 has 3 times the prior weight of outcome 0, and
      outcome 2 is excluded.

      >>> lp = jaxdp.exponential_log_probs(jnp.zeros(3), epsilon=1.0, sensitivity=1.0,
      ...                                  log_measure=jnp.log(jnp.array([1.0, 3.0, 0.0])))
      >>> [round(p, 4) for p in jnp.exp(lp).tolist()]
      [0.25, 0.75, 0.0]

    .. note::
      Finite precision (float32, x64 off), for the law the code implements
      (derivations: ``SECURITY.md``, "Finite precision: the categorical kernel"
      and "noise-based paths"). ``"auto"`` has the guarantee of the method it
      picks (``"gumbel"`` for one draw per row over at most 32 outcomes, where the
      two bounds differ little; else ``"inverse_cdf"``). ``"inverse_cdf"``: weights exact
      to a few ulp at any logit, the scale rounded down, then a sorted descent
      (few draws per row) or a double-float alias table (many draws per row);
      each draw is (ε', δ')-DP with ε' = ε + 8.3e-6, δ' = 2.6e-11 at n = 10³ and
      ε' = ε + 9.8e-6, δ' = 4.5e-11 at n = 10⁶ (ε = 1;
      ``jaxdp._descent.guarantee(n, ε)`` for any n). ``"gumbel"``: an exponential
      race on exact logits with 64-bit noise, ε' = ε + 2.4e-6,
      δ' = n (1 + e^ε') 2⁻⁶⁵. No outcome whose exact probability exceeds δ'/n is
      ever impossible. Under ``jax.enable_x64`` both are far smaller. Scores are
      shifted by their row maximum first (integers exactly), so offsets such as
      1e30 or 2**24 do not move the law.

    .. note::
      Finite precision with ``log_measure`` (float32, ``u = 2**-24``). Each
      outcome's combined logit ε(s_r − m)/(2Δ) + log μ(r) is computed relative to
      a common shift (about the row's largest combined logit, so the row never
      underflows whatever the spread of μ) by exact two-float transforms, to an
      absolute error ``tau <= u**2 (20 R_mu + 1400)``, with ``R_mu`` the spread
      (max − min) of the row's finite log μ, a public number: ``tau <= 1.26u``
      for ``R_mu <= 2**20`` nats. A plain float32 sum would be off by u times
      the logit's magnitude. The weight (or race rate) is then exact to a
      relative ``2 u_exp + 2u + tau``, and each draw is (ε', δ')-DP with
      ``"inverse_cdf"``: ``ε' = ε + 4 (2 u_exp + 2u + 7u + tau + (L + 1) 2**-23)``,
      ``δ' = (L + 1) 7 2**-40 + n e**-87 + n e**(ε - 86)`` (``L + 1`` descent
      levels); ``"gumbel"``: ``ε' = ε + 54u + 4 tau``,
      ``δ' = n (1 + e**ε') 2**-65``. At n = 10**6, ε = 1 and ``R_mu <= 2**20``
      that is ε' ≤ ε + 7.7e-6 and δ' ≤ 4.5e-11 (inverse CDF), ε' ≤ ε + 3.6e-6 and
      δ' ≤ 1e-13 (Gumbel); ``jaxdp._measure.guarantee`` computes it and
      ``SECURITY.md`` ("Finite precision: the base measure") derives it. The
      rounding of ``log_measure`` itself to float32 is data-independent: it
      replaces μ by another public measure and costs no privacy.

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
      C. Dwork and A. Roth, `The Algorithmic Foundations of Differential Privacy
      <https://www.cis.upenn.edu/~aaroth/Papers/privacybook.pdf>`_, 2014, §3.4.
    """
    fn = "exponential"
    key, scores, epsilon, sensitivity, shape = _checks.selection_args(
        fn, key, scores, epsilon, sensitivity, shape, axis
    )
    method = _checks.choice(method, _METHODS, fn, "method")
    if log_measure is not None:
        log_measure = _measure_arg(fn, log_measure, scores, _positive_axis(axis, scores.ndim))
    return _exponential_impl(
        key,
        scores,
        epsilon,
        sensitivity,
        monotonic=_checks.boolean(monotonic, fn, "monotonic"),
        shape=shape,
        method=method,
        log_measure=log_measure,
    )


def _positive_axis(axis: int, ndim: int) -> int:
    return operator.index(axis) % ndim  # already checked by selection_args


@_checks.eager
def _measure_arg(fn: str, log_measure: ArrayLike, scores: Array, axis: int) -> Array:
    """``log_measure`` in the compute dtype, broadcastable to the scores (in their own
    layout, ``axis`` at ``axis``), returned with ``axis`` moved last like the scores.

    A concrete NaN or ``+inf``, a row of all ``-inf``, or a row where no outcome
    has both a finite score and a finite log-measure raises ``ValueError``.
    """
    lam = _checks.float_array(log_measure, fn, "log_measure")
    layout = list(scores.shape)  # scores has axis last: restore the caller's layout
    layout.insert(axis, layout.pop())
    layout = tuple(layout)
    try:
        ok = jnp.broadcast_shapes(lam.shape, layout) == layout
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{fn}: log_measure of shape {lam.shape} must broadcast against the scores of "
            f"shape {layout} (numpy rules, in the scores' layout; the outcome axis is "
            f"{axis}) without enlarging them"
        )
    lam = jnp.moveaxis(lam.reshape((1,) * (len(layout) - lam.ndim) + lam.shape), axis, -1)
    if _checks.is_concrete(lam) and lam.size:
        if bool(jnp.any(jnp.all(lam == -jnp.inf, axis=-1))):
            raise ValueError(
                f"{fn}: log_measure must have a finite entry in every row (-inf excludes an "
                "outcome); a row is all -inf, so no outcome can be selected"
            )
        if _checks.is_concrete(scores):
            live = (scores > -jnp.inf) & (lam > -jnp.inf)
            if bool(jnp.any(~jnp.any(live, axis=-1))):
                raise ValueError(
                    f"{fn}: every row needs an outcome with both a finite score and a finite "
                    "log_measure; in a row, every outcome with a finite log_measure has a "
                    "score of -inf, so no outcome can be selected"
                )
    return lam


def _debug_check_measure(fn: str, scores: Array, log_measure: Array) -> None:
    debug_check(
        ~jnp.any(jnp.isnan(log_measure) | (log_measure == jnp.inf)),
        f"{fn}: log_measure must not contain NaN or +inf",
    )
    live = (scores > -jnp.inf) & (log_measure > -jnp.inf)
    debug_check(
        jnp.all(jnp.any(live, axis=-1)),
        f"{fn}: every row needs an outcome with both a finite score and a finite log_measure",
    )


@partial(jax.jit, static_argnames=("monotonic", "shape", "method"))
def _exponential_impl(
    key, scores, epsilon, sensitivity, *, monotonic, shape, method, log_measure=None
):
    fn = "exponential"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, _checks.compute_dtype())
    if log_measure is not None:
        scores = _logits.float_scores(scores)
        _checks.debug_check_selectable(fn, jnp.max(scores, axis=-1))
        _debug_check_measure(fn, scores, log_measure)
        if method == "auto":
            batch = _rows.broadcast_batch(
                scores.shape[:-1], log_measure.shape[:-1], jnp.shape(scale)
            )
            num_lead, tail = _rows.split_shape(shape, batch)
            method = _kernels.choose_method(num_lead, scores.shape[-1], max(1, math.prod(tail)))
        idx, rows_ok = _measure.sample(key, scores, log_measure, scale, shape, method)
    else:
        logits = _logits.from_scores(scores, scale)
        _checks.debug_check_selectable(fn, logits.row_max)
        # For the inverse CDF the row check comes from the row totals: a separate
        # row maximum would be a second pass over the scores.
        idx, rows_ok = _kernels.exponential_draws(key, logits, shape, method)
    valid = rows_ok & _logits.params_valid(rows_ok.shape, epsilon, sensitivity)
    return jnp.where(jnp.broadcast_to(valid, shape), idx, -1)


def exponential_log_probs(
    scores: ArrayLike,
    *,
    epsilon: ArrayLike,
    sensitivity: ArrayLike,
    monotonic: bool = False,
    axis: int = -1,
    log_measure: ArrayLike | None = None,
) -> Array:
    r"""The exact log-probabilities of :func:`exponential`.

    .. math::

        \log \Pr[r] = \frac{\varepsilon s_r}{2\Delta} + \log\mu(r)
            - \operatorname{logsumexp}_{r'}
              \Bigl(\frac{\varepsilon s_{r'}}{2\Delta} + \log\mu(r')\Bigr)

    (``log_measure`` = log μ, 0 by default).

    **Privacy.** This is a deterministic function of the scores, not a release:
    it is *not* differentially private. It exists to audit and study the
    mechanism (for neighbouring scores the log-ratio is at most ε, McSherry &
    Talwar 2007, Thm 6).

    Args:
      scores: ``[..., n, ...]`` real array; ``-inf`` gives log-probability ``-inf``.
      epsilon: ε > 0, number or array broadcasting with the batch shape.
      sensitivity: Δ > 0, same rules.
      monotonic: static bool, use ε / Δ instead of ε / (2Δ).
      axis: static int, the axis of outcomes.
      log_measure: ``None`` or the base measure as log-weights, as in
        :func:`exponential`; ``-inf`` gives log-probability ``-inf``. The combined
        logits are computed to a few ulp absolute however large the scaled
        scores and the measure that cancel in them (see :func:`exponential`), so
        the result is within a few ulp of ``|log Pr[r]|`` of the exact value.

    Returns:
      Array of the compute dtype, the scores' shape broadcast with ε and Δ, with
      log-probabilities along ``axis`` (normalised with log-sum-exp). Under
      tracing, invalid rows are NaN.

    Raises:
      ValueError: as :func:`exponential`.

    Examples:
      >>> import jax.numpy as jnp, jaxdp
      >>> lp = jaxdp.exponential_log_probs(jnp.array([0.0, 0.0]), epsilon=1.0,
      ...                                  sensitivity=1.0)
      >>> jnp.exp(lp).tolist()
      [0.5, 0.5]

    References:
      F. McSherry and K. Talwar, `Mechanism Design via Differential Privacy
      <https://doi.org/10.1109/FOCS.2007.66>`_, FOCS 2007.
    """
    fn = "exponential_log_probs"
    positive_axis = _checks.canonical_axis(axis, jnp.ndim(scores), fn)
    _, scores, epsilon, sensitivity, _ = _checks.selection_args(
        fn, None, scores, epsilon, sensitivity, None, positive_axis, require_key=False
    )
    monotonic = _checks.boolean(monotonic, fn, "monotonic")
    if log_measure is not None:
        log_measure = _measure_arg(fn, log_measure, scores, positive_axis)
        out = _measure_log_probs_impl(
            scores, epsilon, sensitivity, log_measure, monotonic=monotonic
        )
    else:
        out = _log_probs_impl(scores, epsilon, sensitivity, monotonic=monotonic)
    # Counted from the end: epsilon or sensitivity may add leading batch dims. (An
    # identity moveaxis would still copy the output.)
    if positive_axis == scores.ndim - 1:
        return out
    return jnp.moveaxis(out, -1, positive_axis - scores.ndim)


@partial(jax.jit, static_argnames=("monotonic",))
def _measure_log_probs_impl(scores, epsilon, sensitivity, log_measure, *, monotonic):
    fn = "exponential_log_probs"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    scores = _logits.float_scores(scores)
    _debug_check_measure(fn, scores, log_measure)
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, scores.dtype)
    n = scores.shape[-1]
    batch = _rows.broadcast_batch(scores.shape[:-1], log_measure.shape[:-1], jnp.shape(scale))
    s, lam, c = (
        jnp.broadcast_to(scores, batch + (n,)).reshape(-1, n),
        jnp.broadcast_to(log_measure, batch + (n,)).reshape(-1, n),
        jnp.broadcast_to(scale, batch).reshape(-1),
    )
    out, ok = _measure.log_probs(s, lam, c)
    valid = ok & _logits.params_valid(batch, epsilon, sensitivity).reshape(-1)
    out = jnp.where(valid[:, None], out, jnp.nan)
    return out.reshape(batch + (n,))


@partial(jax.jit, static_argnames=("monotonic",))
def _log_probs_impl(scores, epsilon, sensitivity, *, monotonic):
    fn = "exponential_log_probs"
    _checks.debug_check_positive(fn, epsilon=epsilon, sensitivity=sensitivity)
    _checks.debug_check_scores(fn, scores)
    scale = _logits.scale_factor(epsilon, sensitivity, monotonic, _checks.compute_dtype())
    logits = _logits.from_scores(scores, scale)
    valid = _logits.row_valid(logits.row_max, epsilon, sensitivity)
    values = logits.values()
    out = values - jax.nn.logsumexp(values, axis=-1, keepdims=True)
    return jnp.where(valid[..., None], out, jnp.nan)
