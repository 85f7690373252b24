"""Empirical privacy auditing: statistical lower bounds on a mechanism's privacy loss.

A differential-privacy claim bounds, for neighbouring inputs x and x' and
*every* event S, the ratio ``P[M(x) ∈ S] / P[M(x') ∈ S] <= e^ε`` (plus δ). An
audit draws many outputs on both sides and looks for an event whose ratio is
provably larger. This module does it in the style of StatDP (Ding et al.
2018) and DP-Sniper (Bichsel et al. 2021), with jaxdp's batch samplers:

1. a first, *separate* selection batch from each side picks a few candidate
   events: level sets of the estimated likelihood ratio over bins of the
   output, and unions of rare outcomes (those never drawn on one side, and
   every outcome the selection batch never drew at all), so that a leak
   spread over thousands of outcomes, each too rare to see alone, is found;
2. a fresh batch of the same size counts each chosen event on both sides;
3. one-sided Clopper-Pearson intervals, Bonferroni-corrected over every bound
   of every event looked at in step 2, give a lower bound on ε that holds
   with probability at least ``confidence``.

Because the events are fixed before the counting batch is drawn, the bound is
a valid one-sided test: a mechanism that satisfies its claim yields
``lower_bound <= ε`` with probability ``>= confidence``. A lower bound above
the claimed ε is a proof (at that confidence) that the claim is false; a
lower bound below it proves nothing (the search may have missed the event).

Functions:

* :func:`estimate_epsilon`: lower bound on ε (optionally at a given δ).
* :func:`estimate_delta`: lower bound on the hockey-stick divergence
  ``sup_S P[S] - e^ε Q[S]`` at a given ε, i.e. the smallest δ that the
  mechanism can satisfy at that ε: the check for the Gaussian mechanism.
* :func:`check_sensitivity`: searches add/remove-one (or replace-one)
  neighbours of a dataset for the largest change of a score function, and
  warns with :class:`SensitivityWarning` when it exceeds the declared value.
* :func:`clopper_pearson`: exact binomial confidence bounds (no SciPy needed).

Everything runs wherever JAX runs (CPU, GPU): draws are made in jitted batches
of ``batch_size`` per side and reduced on the device to one number per release;
the host keeps only bin counts (with ``driver="montecarlo"`` the binning too
runs on the devices). ``progress=True`` shows a tqdm bar (``pip install jaxdp[progress]``).

References:
  Z. Ding, Y. Wang, G. Wang, D. Zhang and D. Kifer, `Detecting Violations of
  Differential Privacy <https://doi.org/10.1145/3243734.3243818>`_, CCS 2018.
  B. Bichsel, S. Steffen, I. Bogunovic and M. Vechev, `DP-Sniper: Black-Box
  Discovery of Differential Privacy Violations using Classifiers
  <https://doi.org/10.1109/SP40001.2021.00081>`_, IEEE S&P 2021.
  C. J. Clopper and E. S. Pearson, `The Use of Confidence or Fiducial Limits
  Illustrated in the Case of the Binomial <https://doi.org/10.2307/2331986>`_,
  Biometrika 1934.
  T. Casacuberta, M. Shoemate, S. Vadhan and C. Wagaman, `Widespread
  Underestimation of Sensitivity in Differentially Private Libraries and How
  to Fix It <https://doi.org/10.1145/3548606.3560708>`_, CCS 2022.
"""

from __future__ import annotations

import functools
import hashlib
import math
import statistics
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from ._typing import Array, ArrayLike, PRNGKey

__all__ = [
    "DeltaEstimate",
    "EpsilonEstimate",
    "SensitivityReport",
    "SensitivityWarning",
    "check_sensitivity",
    "clopper_pearson",
    "estimate_delta",
    "estimate_epsilon",
]


class SensitivityWarning(UserWarning):
    """A score function changed more than its declared sensitivity between neighbours.

    Issued by :func:`check_sensitivity` when the largest observed change of any
    score exceeds ``sensitivity``, or when ``monotonic=True`` was declared and a
    neighbour moved scores in both directions. Either means the privacy claim
    of a mechanism using these scores does not hold: raise the sensitivity, clip
    the data, or drop ``monotonic``. Turn it into an error with
    ``warnings.simplefilter("error", jaxdp.audit.SensitivityWarning)``.
    """


class EpsilonEstimate(NamedTuple):
    """The result of :func:`estimate_epsilon`.

    Attributes:
      lower_bound: ε that the mechanism provably exceeds at ``confidence`` (0 if
        no event showed any loss): a claim of ε below this is refuted.
      point_estimate: the observed log-ratio ``log((p - δ) / q)`` of the event
        that gave ``lower_bound`` (can be ``inf`` when q = 0 was observed).
      confidence: the simultaneous confidence level of the bound.
      delta: the δ the bound was computed at.
      event: a description of that event.
      counts: ``(count on the larger side, count on the other side)`` of the event.
      num_samples: draws per side used for the counts (step 2).
      num_events: events (both directions) whose bounds were corrected for.
    """

    lower_bound: float
    point_estimate: float
    confidence: float
    delta: float
    event: str
    counts: tuple[int, int]
    num_samples: int
    num_events: int


class DeltaEstimate(NamedTuple):
    """The result of :func:`estimate_delta`.

    Attributes:
      lower_bound: δ that the mechanism provably exceeds at ε, at ``confidence``
        (a lower bound on the hockey-stick divergence; 0 if none was found).
      point_estimate: the observed ``p - e^ε q`` of the event that gave it.
      confidence: the simultaneous confidence level.
      epsilon: the ε at which δ was bounded.
      event: a description of the event.
      counts: ``(count on the larger side, count on the other side)``.
      num_samples: draws per side used for the counts.
      num_events: events whose bounds were corrected for.
    """

    lower_bound: float
    point_estimate: float
    confidence: float
    epsilon: float
    event: str
    counts: tuple[int, int]
    num_samples: int
    num_events: int


class SensitivityReport(NamedTuple):
    """The result of :func:`check_sensitivity`.

    Attributes:
      max_change: the largest change of any score over the neighbours searched.
      sensitivity: the declared sensitivity.
      exceeded: ``max_change > sensitivity`` (up to ``rtol``).
      worst: description of the neighbour that gave ``max_change``.
      num_neighbours: how many neighbouring datasets were evaluated.
      monotonic: True when every neighbour moved all scores in one direction.
      monotonic_violated: ``monotonic=True`` was declared but ``monotonic`` is False.
    """

    max_change: float
    sensitivity: float
    exceeded: bool
    worst: str
    num_neighbours: int
    monotonic: bool
    monotonic_violated: bool


# ----------------------------------------------------------------------------- Clopper-Pearson


@partial(jax.jit, static_argnames=("steps",))
def _beta_ppf_bracket(q: Array, a: Array, b: Array, steps: int = 120) -> tuple[Array, Array]:
    """Bisection bracket ``[lo, hi]`` of the Beta(a, b) quantile at ``q`` (float64)."""
    betainc = jax.scipy.special.betainc

    def step(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        below = betainc(a, b, mid) < q
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo = jnp.zeros(jnp.shape(q), jnp.float64)
    return jax.lax.fori_loop(0, steps, step, (lo, jnp.ones_like(lo)))


def clopper_pearson(successes: ArrayLike, trials: ArrayLike, alpha: float) -> tuple[Array, Array]:
    r"""One-sided Clopper-Pearson bounds for a binomial proportion.

    .. math::

        p_{lo} = B^{-1}(\alpha;\, k, n-k+1), \qquad
        p_{hi} = B^{-1}(1-\alpha;\, k+1, n-k)

    with :math:`p_{lo} = 0` when k = 0 and :math:`p_{hi} = 1` when k = n. Each
    bound alone holds with probability at least 1 - α (a two-sided interval at
    level 1 - 2α). Beta quantiles come from a float64 bisection on
    :func:`jax.scipy.special.betainc`, rounded outwards, so SciPy is not needed.

    Args:
      successes: integer array k.
      trials: integer array n >= k, broadcasting with k.
      alpha: the error probability of *each* bound, in (0, 1).

    Returns:
      ``(lower, upper)`` float64 NumPy arrays.

    Raises:
      ValueError: ``alpha`` outside (0, 1), or k outside [0, n].

    Examples:
      >>> import jaxdp.audit
      >>> lo, hi = jaxdp.audit.clopper_pearson(0, 10, 0.05)
      >>> float(lo), round(float(hi), 4)
      (0.0, 0.2589)

    References:
      C. J. Clopper and E. S. Pearson, `The Use of Confidence or Fiducial Limits
      Illustrated in the Case of the Binomial <https://doi.org/10.2307/2331986>`_,
      Biometrika 1934.
    """
    if not 0 < float(alpha) < 1:
        raise ValueError(f"clopper_pearson: alpha must be in (0, 1), got {alpha!r}")
    k, n = np.broadcast_arrays(np.asarray(successes, np.float64), np.asarray(trials, np.float64))
    if np.any((k < 0) | (k > n)) or np.any(k != np.round(k)) or np.any(n != np.round(n)):
        raise ValueError("clopper_pearson: successes must be integers in [0, trials]")
    lower, upper = _bounds(k.ravel(), k.ravel(), n.ravel(), float(alpha))
    return lower.reshape(k.shape), upper.reshape(k.shape)


def _bounds(k_lower, k_upper, n, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Lower bounds for counts ``k_lower`` and upper bounds for ``k_upper``, one bisection."""
    k_lower = np.asarray(k_lower, np.float64)
    k_upper = np.asarray(k_upper, np.float64)
    n_lower, n_upper = np.broadcast_to(n, k_lower.shape), np.broadcast_to(n, k_upper.shape)
    q = np.concatenate([np.full(k_lower.shape, alpha), np.full(k_upper.shape, 1 - alpha)])
    a = np.concatenate([np.maximum(k_lower, 1), k_upper + 1])
    b = np.concatenate([n_lower - k_lower + 1, np.maximum(n_upper - k_upper, 1)])
    # Float64 numbers and a 120-step bisection with betainc's own loop inside: on the
    # host CPU, never an accelerator (where each step of both loops is a launch).
    with jax.enable_x64(True), jax.default_device(jax.devices("cpu")[0]):
        lo, hi = (np.asarray(v) for v in _beta_ppf_bracket(q, a, b))
    split = len(k_lower)
    lower = np.where(k_lower == 0, 0.0, lo[:split])
    upper = np.where(k_upper == n_upper, 1.0, hi[split:])
    return lower, upper


def _lower_upper(k_big, k_small, n, alpha):
    return _bounds(k_big, k_small, np.float64(n), alpha)


# ----------------------------------------------------------------------------- sampling


def _release_shape(mechanism: Callable, data: Any, key: PRNGKey) -> tuple[tuple, tuple, Any]:
    """(batch shape to pass after the draw dim, shape of one release, dtype)."""
    try:
        single = jax.eval_shape(lambda k: mechanism(k, data), key)
    except Exception as err:  # noqa: BLE001  (re-raised as the documented type)
        raise ValueError(f"audit: mechanism(key, x) failed: {type(err).__name__}: {err}") from err
    for cut in range(len(single.shape), -1, -1):
        batch = tuple(single.shape[:cut])
        try:
            out = jax.eval_shape(lambda k, b=batch: mechanism(k, data, shape=(2,) + b), key)
        except (ValueError, TypeError):
            continue
        if out.shape == (2,) + tuple(single.shape):
            return batch, tuple(single.shape), single.dtype
    raise ValueError(
        "audit: mechanism must follow the jaxdp convention mechanism(key, x, shape=...), "
        "with leading i.i.d. draws in shape"
    )


def _integer_codes(draws: Array) -> Array:
    """One int32 code per release (row of ``draws``): a polynomial hash of its values.

    Distinct small tuples (values below 10**6, as for :func:`jaxdp.top_k`
    indices) get distinct codes; collisions elsewhere only merge outputs into
    one event, and any function of the output is a valid event, so bounds stay
    valid.
    """
    flat = draws.reshape((draws.shape[0], -1)).astype(jnp.int32)
    flat = jax.lax.bitcast_convert_type(flat + 1, jnp.uint32)
    code = jnp.zeros((draws.shape[0],), jnp.uint32)
    for j in range(flat.shape[1]):
        code = code * jnp.uint32(1_000_003) + flat[:, j]
    return jax.lax.bitcast_convert_type(code, jnp.int32)


#: Label of the bin that holds every categorical output the selection batch never drew.
_UNSEEN = "any output not seen in the selection batch"


class _Binning(NamedTuple):
    """A partition of the outputs fixed by the selection batch.

    ``kind="categories"``: bin ``i < len(points)`` holds the outputs equal to
    ``points[i]`` (sorted: a lookup table over the values seen in the selection
    batch), and the last bin every other output, so an output never seen there
    still has a bin. ``kind="intervals"``: bin ``i`` is ``(points[i-1], points[i]]``
    with ``points[-1] = -inf`` and ``points[len(points)] = +inf``; a value is
    assigned with ``searchsorted(side="left")``, which is exactly that bin.
    """

    kind: str
    points: np.ndarray  # sorted categories, or interior edges
    what: str = "output"

    @property
    def discrete(self) -> bool:
        return self.kind == "categories"

    @property
    def size(self) -> int:
        return len(self.points) + 1

    def ids(self, values: np.ndarray) -> np.ndarray:
        if self.discrete:
            if len(self.points) == 0:
                return np.zeros(values.shape, np.int64)
            idx = np.searchsorted(self.points, values, side="left")
            hit = self.points[np.minimum(idx, len(self.points) - 1)] == values
            return np.where(hit, idx, len(self.points))
        return np.searchsorted(self.points, values, side="left")

    def counts(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.ids(values).ravel(), minlength=self.size).astype(np.int64)

    def label(self, i: int) -> str:
        if self.discrete:
            return _UNSEEN if i == len(self.points) else f"{self.what} == {self.points[i]}"
        lo = "-inf" if i == 0 else f"{self.points[i - 1]:.6g}"
        hi = "inf" if i == len(self.points) else f"{self.points[i]:.6g}"
        return f"{self.what} in ({lo}, {hi}]"


def _is_categorical(values: np.ndarray) -> bool:
    return bool(np.issubdtype(values.dtype, np.integer))


class _Spec(NamedTuple):
    """What one jitted batch does; hashable, so equal specs share one compilation."""

    mechanism: Callable
    statistic: Callable | None
    batch: tuple
    single: tuple
    integer: bool

    def reduce(self, draws: Array) -> Array:
        if self.statistic is not None:
            out = jnp.asarray(self.statistic(draws))
            if out.shape != draws.shape[:1]:
                raise ValueError(
                    f"audit: statistic must map draws of shape {draws.shape} to shape "
                    f"{draws.shape[:1]}, got {out.shape}"
                )
            if out.dtype == jnp.bool_:  # a 0/1 statistic: two categories
                return out.astype(jnp.int32)
            return out
        if self.integer:
            if math.prod(self.single) == 1:
                return draws.reshape((-1,)).astype(jnp.int32)
            return _integer_codes(draws)
        if math.prod(self.single) != 1:
            raise ValueError(
                f"audit: releases of shape {self.single} are not scalar; pass statistic= "
                "mapping a batch of releases to one number each (e.g. a coordinate)"
            )
        return draws.reshape((-1,))


@partial(jax.jit, static_argnames=("spec", "num"))
def _draw_statistics(key: PRNGKey, index: Array, data: Any, *, spec: _Spec, num: int) -> Array:
    """``num`` releases on ``data`` with key ``fold_in(key, index)``, one number each."""
    draws = spec.mechanism(jax.random.fold_in(key, index), data, shape=(num,) + spec.batch)
    return spec.reduce(draws)


@functools.lru_cache(maxsize=64)
def _montecarlo_trial(spec: _Spec, discrete: bool) -> Callable:
    """One release per trial, reduced to its bin id (cached: the driver reuses its step).

    The same assignment as :meth:`_Binning.ids`, on the device."""

    def trial(key, data, points):
        value = spec.reduce(spec.mechanism(key, data)[None])[0]
        if not discrete:
            return jnp.searchsorted(points, value, side="left").astype(jnp.int32)
        if points.shape[0] == 0:
            return jnp.zeros((), jnp.int32)
        idx = jnp.searchsorted(points, value, side="left")
        hit = points[jnp.minimum(idx, points.shape[0] - 1)] == value
        return jnp.where(hit, idx, points.shape[0]).astype(jnp.int32)

    return trial


def _montecarlo_counts(spec, binning, key, data, num, progress) -> np.ndarray:
    from . import montecarlo

    trial = _montecarlo_trial(spec, binning.discrete)
    out = montecarlo.run(
        trial, key, num, data, jnp.asarray(binning.points), bins=binning.size, progress=progress
    )
    return np.asarray(out.histogram, np.int64)


def _tally(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Merges per-batch ``np.unique(..., return_counts=True)`` results."""
    if not parts:
        return np.zeros((0,), np.int32), np.zeros((0,), np.int64)
    values = np.concatenate([v for v, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    uniq, inverse = np.unique(values, return_inverse=True)
    return uniq, np.bincount(inverse.ravel(), weights=counts, minlength=len(uniq)).astype(np.int64)


def _category_binning(tally_x, tally_n, what: str) -> tuple[_Binning, np.ndarray, np.ndarray]:
    """Every value either selection batch drew is a category (a lookup table)."""
    (ux, cx), (un, cn) = tally_x, tally_n
    points = np.union1d(ux, un)
    a = np.zeros(len(points) + 1, np.int64)
    b = np.zeros(len(points) + 1, np.int64)
    a[np.searchsorted(points, ux)] = cx
    b[np.searchsorted(points, un)] = cn
    return _Binning("categories", points, what), a, b


def _value_binning(sel_x: np.ndarray, sel_n: np.ndarray, num_bins: int) -> _Binning:
    """Float values: their exact values when the selection batch shows at most
    ``num_bins - 1`` of them (atoms, e.g. a 0/1 statistic), else ``num_bins``
    intervals ``(a, b]`` at the quantiles of the pooled selection batch."""
    pooled = np.concatenate([sel_x.ravel(), sel_n.ravel()])
    distinct = np.unique(pooled[~np.isnan(pooled)])
    if len(distinct) <= num_bins - 1:
        return _Binning("categories", distinct)
    finite = pooled[np.isfinite(pooled)]
    if finite.size == 0:
        return _Binning("intervals", np.zeros((0,), pooled.dtype))
    qs = np.linspace(0, 1, num_bins + 1)[1:-1]
    return _Binning("intervals", np.unique(np.quantile(finite, qs).astype(pooled.dtype)))


def _normal_quantile(p: float) -> float:
    """Upper quantile z with P[N(0,1) > z] = p."""
    return statistics.NormalDist().inv_cdf(1.0 - p)


def _candidates(a_sel, b_sel, n_sel, num_main, objective, z, num_events, ordered):
    """Candidate events from the selection counts, ranked by the bound each is
    predicted to give on ``num_main`` fresh draws.

    For each direction (event more likely under x, or under x'), with ``big``
    the counts of that side and ``small`` of the other:

    * the outcomes never drawn on the small side (including every outcome the
      selection batch never drew at all: the default bin), and those drawn on
      the big side but never on the small one: the unions of rare outcomes that
      carry a leak of probability-0 outcomes;
    * the level sets ``{r >= t}`` of the smoothed log-ratio
      ``r = log((big + 1/2) / (small + 1/2))``, cut only between distinct values
      (the Neyman-Pearson events, up to estimation);
    * when the bins are ordered, the tails ``{y <= t}`` and ``{y > t}``.

    Scores are computed for every candidate at once from prefix sums, and only
    the ``num_events`` best distinct events are built as boolean masks over the
    bins. Returns a list of ``(mask, direction)``; direction 0: more likely
    under x, 1: under x_neighbour.
    """
    size = len(a_sel)
    groups = []  # (scores, direction, order or None, prefix lengths or a mask)

    def predicted(ca, cb):
        p = (np.asarray(ca, np.float64) + 0.5) / (n_sel + 1)
        q = (np.asarray(cb, np.float64) + 0.5) / (n_sel + 1)
        sp = z * np.sqrt(p * (1 - p) / num_main)
        sq = z * np.sqrt(q * (1 - q) / num_main)
        return objective(p - sp, q + sq)

    for direction, (big, small) in enumerate(((a_sel, b_sel), (b_sel, a_sel))):
        for mask in (small == 0, (small == 0) & (big > 0)):
            if 0 < mask.sum() < size:
                score = predicted(big[mask].sum(), small[mask].sum())
                groups.append((np.atleast_1d(score), direction, None, mask))
        ratio = np.log((big + 0.5) / (small + 0.5))
        order = np.argsort(-ratio, kind="stable")
        levels = ratio[order]
        orders = [(order, np.flatnonzero(levels[1:] != levels[:-1]) + 1)]
        if ordered:
            natural = np.arange(size)
            orders += [(natural, natural[1:]), (natural[::-1], natural[1:])]
        for order, cuts in orders:
            if len(cuts) == 0:
                continue
            ca = np.cumsum(big[order])[cuts - 1]
            cb = np.cumsum(small[order])[cuts - 1]
            groups.append((predicted(ca, cb), direction, order, cuts))
    if not groups:
        return []
    scores = np.concatenate([g[0] for g in groups])
    owner = np.concatenate([np.full(len(g[0]), i) for i, g in enumerate(groups)])
    within = np.concatenate([np.arange(len(g[0])) for g in groups])
    chosen, seen = [], set()
    for flat in np.argsort(-scores, kind="stable"):
        _, direction, order, cuts = groups[owner[flat]]
        if order is None:
            mask = cuts
        else:
            mask = np.zeros(size, bool)
            mask[order[: cuts[within[flat]]]] = True
        sig = (direction, hashlib.blake2b(np.packbits(mask).tobytes()).hexdigest())
        if sig not in seen:
            seen.add(sig)
            chosen.append((mask, direction))
        if len(chosen) == num_events:
            break
    return chosen


def _describe(mask: np.ndarray, binning: _Binning, direction: int) -> str:
    idx = np.flatnonzero(mask)
    parts = [binning.label(i) for i in idx[:6]]
    text = " or ".join(parts) + (f" (+{len(idx) - 6} more bins)" if len(idx) > 6 else "")
    if binning.discrete and len(idx) > 6 and mask[-1]:
        text += f", including {_UNSEEN}"
    side = "x" if direction == 0 else "x_neighbour"
    return f"{{{text}}}, more likely under {side}"


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("audit: progress=True needs tqdm (pip install jaxdp[progress])") from err
    return tqdm(total=total, desc="audit", unit="batch")


def _validate(fn, num_samples, confidence, num_select, num_events, num_bins, batch_size):
    num_samples = _checks.static_int(num_samples, fn, "num_samples", minimum=1)
    batch_size = _checks.static_int(batch_size, fn, "batch_size", minimum=1)
    num_events = _checks.static_int(num_events, fn, "num_events", minimum=1)
    num_bins = _checks.static_int(num_bins, fn, "num_bins", minimum=2)
    if num_select is None:
        num_select = num_samples
    num_select = _checks.static_int(num_select, fn, "num_select", minimum=1)
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0 < confidence < 1
    ):
        raise ValueError(f"{fn}: confidence must be in (0, 1), got {confidence!r}")
    return num_samples, float(confidence), num_select, num_events, num_bins, batch_size


def _audit(
    fn, mechanism, x, x_neighbour, num_samples, key, confidence, num_select, num_events,
    num_bins, statistic, batch_size, progress, objective, bound, driver,
):  # fmt: skip
    key = _checks.single_key(key, fn)
    driver = _checks.choice(driver, ("auto", "batched", "montecarlo"), fn, "driver")
    k_sel_x, k_sel_n, k_main_x, k_main_n = jax.random.split(key, 4)
    batch, single, dtype = _release_shape(mechanism, x, k_sel_x)
    if jax.eval_shape(lambda k: mechanism(k, x_neighbour), k_sel_n).shape != single:
        raise ValueError(f"{fn}: mechanism(key, x) and mechanism(key, x_neighbour) differ in shape")
    integer = bool(jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_)
    spec = _Spec(mechanism, statistic, batch, single, integer)
    # Every batch, selection or counting, has the same size: one compilation per side.
    num_batches = -(-num_samples // batch_size)
    per_batch = -(-num_samples // num_batches)
    total = per_batch * num_batches
    select_batches = -(-num_select // per_batch)
    n_sel = select_batches * per_batch
    bar = _progress(2 * (num_batches + select_batches), progress)

    def draw(k, i, data):
        out = np.asarray(_draw_statistics(k, i, data, spec=spec, num=per_batch))
        if bar is not None:
            bar.update(1)
        return out

    # Step 1: separate selection batches choose the bins and the events.
    # Categorical outputs are tallied batch by batch (memory: the distinct values).
    sides = []
    for k, data in ((k_sel_x, x), (k_sel_n, x_neighbour)):
        values, tallies = [], []
        for i in range(select_batches):
            v = draw(k, i, data)
            if _is_categorical(v):
                tallies.append(np.unique(v, return_counts=True))
            else:
                values.append(v)
        sides.append((values, tallies))
    if sides[0][1]:
        what = "output" if math.prod(single) == 1 else "output code"
        what = "statistic" if statistic is not None else what
        binning, a_sel, b_sel = _category_binning(_tally(sides[0][1]), _tally(sides[1][1]), what)
    else:
        sel_x, sel_n = np.concatenate(sides[0][0]), np.concatenate(sides[1][0])
        binning = _value_binning(sel_x, sel_n, num_bins)
        if statistic is not None:
            binning = binning._replace(what="statistic")
        a_sel, b_sel = binning.counts(sel_x), binning.counts(sel_n)
    del sides
    alpha_each = (1 - confidence) / (2 * num_events)
    z = _normal_quantile(alpha_each)
    ordered = statistic is not None or math.prod(single) == 1
    events = _candidates(a_sel, b_sel, n_sel, total, objective, z, num_events, ordered)

    # Step 2: fresh batches count every bin on both sides.
    if driver == "auto":
        driver = "montecarlo" if jax.device_count() > 1 else "batched"
    if driver == "montecarlo":  # jaxdp.montecarlo: sharded over every device
        if bar is not None:
            bar.close()
        counts_x = _montecarlo_counts(spec, binning, k_main_x, x, total, progress)
        counts_n = _montecarlo_counts(spec, binning, k_main_n, x_neighbour, total, progress)
    else:
        counts_x = np.zeros(binning.size, np.int64)
        counts_n = np.zeros(binning.size, np.int64)
        for i in range(num_batches):
            counts_x += binning.counts(draw(k_main_x, i, x))
            counts_n += binning.counts(draw(k_main_n, i, x_neighbour))
        if bar is not None:
            bar.close()

    # Step 3: Clopper-Pearson bounds, Bonferroni over 2 bounds x num_events.
    ks_big, ks_small = [], []
    for mask, direction in events:
        big, small = (counts_x, counts_n) if direction == 0 else (counts_n, counts_x)
        ks_big.append(int(big[mask].sum()))
        ks_small.append(int(small[mask].sum()))
    if not events:  # a single bin: no event separates the sides
        return (-math.inf, -math.inf, "none", (0, 0)), total, 0
    p_lo, q_hi = _lower_upper(np.asarray(ks_big), np.asarray(ks_small), total, alpha_each)
    best = None
    for j, (mask, direction) in enumerate(events):
        lb = bound(float(p_lo[j]), float(q_hi[j]))
        point = bound(ks_big[j] / total, ks_small[j] / total)
        if best is None or lb > best[0]:
            desc = _describe(mask, binning, direction)
            best = (lb, point, desc, (ks_big[j], ks_small[j]))
    return best, total, len(events)


def estimate_epsilon(
    mechanism: Callable[..., Array],
    x: Any,
    x_neighbour: Any,
    num_samples: int,
    *,
    key: PRNGKey,
    delta: float = 0.0,
    confidence: float = 0.95,
    num_select: int | None = None,
    num_events: int = 4,
    num_bins: int = 32,
    statistic: Callable[[Array], Array] | None = None,
    batch_size: int = 1 << 20,
    progress: bool = False,
    driver: str = "auto",
) -> EpsilonEstimate:
    r"""A high-confidence lower bound on the privacy loss of ``mechanism`` between x and x'.

    .. math::

        \hat\varepsilon_{lo} = \max_{S} \log
        \frac{\mathrm{CP}_{lo}(\#\{M(x) \in S\}) - \delta}{\mathrm{CP}_{hi}(\#\{M(x') \in S\})}

    over the events S chosen on a separate selection batch (both directions),
    with one-sided Clopper-Pearson bounds at level ``(1 - confidence) / (2 E)``
    each, E = ``num_events`` (Bonferroni over the 2E bounds).

    **Privacy.** This is a test, not a mechanism: it handles the *inputs*
    x and x' in the clear. If ``mechanism`` is (ε, δ)-DP for the pair, then
    ``lower_bound <= ε`` with probability at least ``confidence``.

    Bins. Integer outputs (and integer or boolean statistics) are kept as
    categories: every value that the selection batch drew on either side
    gets its own bin (a lookup table over the values seen, however many), and
    one default bin holds every value it never drew. Vector releases need a
    ``statistic`` unless they are integer (then each joint value is a
    category, as for :func:`jaxdp.top_k`). Float outputs that take at most
    ``num_bins - 1`` distinct values in the selection batch (a 0/1 statistic)
    are categories too; other float outputs fall in ``num_bins`` intervals
    ``(a, b]`` at the quantiles of the pooled selection batch.

    Events. For each direction, the candidates are: the outputs never drawn
    on the other side in the selection batch (the union of the rare and the
    unseen outcomes, including the default bin), and those drawn on this side
    but never on the other; the level sets of the smoothed log-ratio
    ``log((k + 1/2) / (k' + 1/2))`` of the selection counts (which contain the
    optimal, Neyman-Pearson event); and, for ordered outputs, the tails. They
    are ranked by the bound they are predicted to give at ``num_samples``, and
    the ``num_events`` best are counted on the fresh batch. A mechanism that
    makes thousands of rare outcomes impossible on one side only (the float32
    rounding leak of an inverse CDF) is caught this way; the selection batch
    must be large enough to draw many of them.

    Args:
      mechanism: ``mechanism(key, data, shape=None)`` with the jaxdp convention,
        e.g. ``functools.partial(jaxdp.exponential, epsilon=1.0, sensitivity=1.0)``.
        It is called once per batch per side with ``shape=(batch,) + batch_shape``.
      x: the data of one side (any pytree the mechanism takes).
      x_neighbour: the neighbouring data.
      num_samples: draws per side for the counting step (10**5-10**8).
      key: a PRNG key; the selection and counting draws use split keys.
      delta: δ >= 0 to bound ε at; 0 for pure DP.
      confidence: simultaneous confidence level, in (0, 1).
      num_select: draws per side for choosing the events (default
        ``num_samples``: rare outcomes must be drawn to be found).
      num_events: events carried to the counting step (the Bonferroni factor).
      num_bins: intervals for float outputs (integer outputs keep every value
        seen as a category).
      statistic: optional function mapping a batch of releases
        ``[batch, *release_shape]`` to one number each ``[batch]``, jittable.
      batch_size: draws per side per jitted call (memory bound).
      progress: show a tqdm progress bar.
      driver: how the counting step runs: ``"batched"`` (jitted batches of
        ``batch_size`` on the default device), ``"montecarlo"``
        (:func:`jaxdp.montecarlo.run`: one release per trial, sharded over every
        device and process), or ``"auto"`` (``"montecarlo"`` when there is more
        than one device).

    Returns:
      :class:`EpsilonEstimate`.

    Raises:
      ValueError: bad counts, levels or sizes; a mechanism that does not follow
        the calling convention; non-scalar float releases without ``statistic``.

    Examples:
      >>> import functools, jax, jax.numpy as jnp, jaxdp, jaxdp.audit
      >>> mech = functools.partial(jaxdp.randomized_response, epsilon=1.0)
      >>> est = jaxdp.audit.estimate_epsilon(mech, jnp.array(0), jnp.array(1),
      ...                                    10**5, key=jax.random.key(0))
      >>> 0.9 < est.lower_bound <= 1.0, est.confidence
      (True, 0.95)

    References:
      Z. Ding, Y. Wang, G. Wang, D. Zhang and D. Kifer, `Detecting Violations of
      Differential Privacy <https://doi.org/10.1145/3243734.3243818>`_, CCS 2018.
      B. Bichsel, S. Steffen, I. Bogunovic and M. Vechev, `DP-Sniper
      <https://doi.org/10.1109/SP40001.2021.00081>`_, IEEE S&P 2021.
    """
    fn = "estimate_epsilon"
    num_samples, confidence, num_select, num_events, num_bins, batch_size = _validate(
        fn, num_samples, confidence, num_select, num_events, num_bins, batch_size
    )
    delta = float(delta)
    if not 0 <= delta < 1:
        raise ValueError(f"{fn}: delta must be in [0, 1), got {delta!r}")

    def bound(p, q):
        if p - delta <= 0:
            return -math.inf
        if q <= 0:
            return math.inf
        return math.log((p - delta) / q)

    def objective(p, q):  # vectorised ``bound`` for ranking candidate events
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (p - delta) / np.clip(q, 1e-300, 1.0)
            return np.where(p - delta > 0, np.log(np.maximum(ratio, 1e-300)), -np.inf)

    best, total, used = _audit(
        fn, mechanism, x, x_neighbour, num_samples, key, confidence, num_select, num_events,
        num_bins, statistic, batch_size, progress, objective, bound, driver,
    )  # fmt: skip
    lb, point, desc, counts = best
    return EpsilonEstimate(
        lower_bound=max(0.0, lb),
        point_estimate=point,
        confidence=confidence,
        delta=delta,
        event=desc,
        counts=counts,
        num_samples=total,
        num_events=used,
    )


def estimate_delta(
    mechanism: Callable[..., Array],
    x: Any,
    x_neighbour: Any,
    num_samples: int,
    *,
    epsilon: float,
    key: PRNGKey,
    confidence: float = 0.95,
    num_select: int | None = None,
    num_events: int = 4,
    num_bins: int = 32,
    statistic: Callable[[Array], Array] | None = None,
    batch_size: int = 1 << 20,
    progress: bool = False,
    driver: str = "auto",
) -> DeltaEstimate:
    r"""A high-confidence lower bound on the hockey-stick divergence at ε.

    .. math::

        \hat\delta_{lo} = \max_S\; \mathrm{CP}_{lo}(\#\{M(x) \in S\})
            - e^{\varepsilon}\, \mathrm{CP}_{hi}(\#\{M(x') \in S\})
            \;\le\; \sup_S P[M(x) \in S] - e^\varepsilon P[M(x') \in S]

    (both directions), the smallest δ for which the pair can satisfy
    (ε, δ)-DP. Events are chosen as in :func:`estimate_epsilon`, and include
    the optimal one ``{y : p(y) > e^ε q(y)}`` up to binning.

    **Privacy.** A test of an (ε, δ) claim: if ``mechanism`` is (ε, δ)-DP then
    ``lower_bound <= δ`` with probability at least ``confidence``. For
    :func:`jaxdp.gaussian` with neighbours at L2 distance Δ₂ the exact value is
    :math:`\Phi(\Delta/2\sigma - \varepsilon\sigma/\Delta) - e^\varepsilon
    \Phi(-\Delta/2\sigma - \varepsilon\sigma/\Delta)` = δ (Balle & Wang 2018),
    so the analytic mechanism is tight and the bound approaches δ from below.

    Args:
      mechanism: as :func:`estimate_epsilon`.
      x: the data of one side.
      x_neighbour: the neighbouring data.
      num_samples: draws per side for the counting step.
      epsilon: ε >= 0 at which to bound δ.
      key: a PRNG key.
      confidence: simultaneous confidence level, in (0, 1).
      num_select: draws per side for choosing events (default ``num_samples``).
      num_events: events carried to the counting step.
      num_bins: intervals for float outputs, as in :func:`estimate_epsilon`.
      statistic: optional map from a batch of releases to one number each.
      batch_size: draws per side per jitted call.
      progress: show a tqdm progress bar.
      driver: ``"batched"``, ``"montecarlo"`` or ``"auto"``, as in
        :func:`estimate_epsilon`.

    Returns:
      :class:`DeltaEstimate`.

    Raises:
      ValueError: as :func:`estimate_epsilon`; ε negative or not finite.

    Examples:
      >>> import functools, jax, jax.numpy as jnp, jaxdp, jaxdp.audit
      >>> mech = functools.partial(jaxdp.gaussian, epsilon=1.0, delta=0.05,
      ...                          sensitivity=1.0)
      >>> est = jaxdp.audit.estimate_delta(mech, jnp.array(0.0), jnp.array(1.0),
      ...                                  10**5, epsilon=1.0, key=jax.random.key(0))
      >>> est.lower_bound <= 0.05
      True

    References:
      B. Balle and Y.-X. Wang, `Improving the Gaussian Mechanism for Differential
      Privacy <https://arxiv.org/abs/1805.06530>`_, ICML 2018.
      Z. Ding et al., `Detecting Violations of Differential Privacy
      <https://doi.org/10.1145/3243734.3243818>`_, CCS 2018.
    """
    fn = "estimate_delta"
    num_samples, confidence, num_select, num_events, num_bins, batch_size = _validate(
        fn, num_samples, confidence, num_select, num_events, num_bins, batch_size
    )
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"{fn}: epsilon must be finite and >= 0, got {epsilon!r}")
    factor = math.exp(epsilon)

    def bound(p, q):
        return p - factor * q

    best, total, used = _audit(
        fn, mechanism, x, x_neighbour, num_samples, key, confidence, num_select, num_events,
        num_bins, statistic, batch_size, progress, bound, bound, driver,
    )  # fmt: skip
    lb, point, desc, counts = best
    return DeltaEstimate(
        lower_bound=max(0.0, lb),
        point_estimate=point,
        confidence=confidence,
        epsilon=epsilon,
        event=desc,
        counts=counts,
        num_samples=total,
        num_events=used,
    )


# ----------------------------------------------------------------------------- sensitivity


_SENSITIVITY_CHUNK = 128


@partial(jax.jit, static_argnames=("score_fn", "kind"))
def _neighbour_changes(data, items, where, base, tol, *, score_fn, kind):
    """(largest |change|, moved both ways) of the scores for a chunk of neighbours."""
    m = data.shape[0]

    def neighbour(item, w):
        if kind == "remove":
            keep = jnp.arange(m - 1)
            return data[keep + (keep >= item)]
        if kind == "add":
            return jnp.concatenate([data, item[None].astype(data.dtype)])
        return data.at[w].set(item.astype(data.dtype))

    ws = jnp.zeros(items.shape[:1], jnp.int32) if where is None else where
    scores = jax.vmap(lambda i, w: jnp.ravel(score_fn(neighbour(i, w))))(items, ws)
    diff = jnp.where(scores == base[None], 0.0, scores - base[None])
    diff = jnp.where(jnp.isnan(diff), jnp.inf, diff)
    change = jnp.max(jnp.abs(diff), axis=1)
    mixed = (jnp.max(diff, axis=1) > tol) & (jnp.min(diff, axis=1) < -tol)
    return change, mixed


def check_sensitivity(
    score_fn: Callable[[Array], Array],
    dataset: ArrayLike,
    *,
    sensitivity: float,
    key: PRNGKey,
    monotonic: bool = False,
    relation: str = "add_remove",
    domain: tuple[float, float] | None = None,
    num_random: int = 256,
    num_search_steps: int = 8,
    max_removals: int = 2048,
    rtol: float = 1e-6,
    warn: bool = True,
) -> SensitivityReport:
    r"""Searches neighbouring datasets for the largest change of a score function.

    .. math::

        \widehat{\Delta} = \max_{D' \sim D}\; \max_r\; |u(D', r) - u(D, r)|

    over the neighbours D' searched: with ``relation="add_remove"``, every
    removal of one record (or ``max_removals`` random ones) and additions of
    candidate records; with ``"replace"``, replacements of random records by
    candidates. Candidates are copies of existing records, the per-coordinate
    minimum and maximum of the data, and, when ``domain=(low, high)`` is given,
    its corners and uniform points in it; then an adversarial hill-climb
    (``num_search_steps`` rounds of ``num_random`` perturbations of the best
    candidates so far, kept inside ``domain``) pushes towards larger changes.

    The result is a *lower* bound on the true sensitivity of u at D: a value
    over the declared ``sensitivity`` proves the declaration wrong (the most
    common bug in DP code, Casacuberta et al. 2022); a value under it does not
    prove it right. Sensitivity is a worst case over *all* datasets: run the
    check on a few, including small and extreme ones.

    **Privacy.** A development tool: it reads the dataset in the clear and
    releases exact score changes. Do not run it on data whose privacy matters
    outside a trusted environment.

    Args:
      score_fn: ``score_fn(dataset) -> scores`` (any shape), jittable and
        ``vmap``-able, accepting datasets of m-1, m and m+1 records.
      dataset: ``[m, *record_shape]`` array, m >= 1.
      sensitivity: the declared Δ > 0.
      key: a PRNG key for the random search.
      monotonic: also check that every neighbour moves all scores in the same
        direction (the promise behind ``monotonic=True``).
      relation: ``"add_remove"`` (jaxdp's default) or ``"replace"``.
      domain: optional ``(low, high)`` bounds of a record's entries; without it
        additions only use values seen in the data.
      num_random: candidates per search round.
      num_search_steps: adversarial hill-climbing rounds.
      max_removals: removals tried (all of them when m is at most this).
      rtol: relative tolerance on ``sensitivity`` before warning.
      warn: issue a :class:`SensitivityWarning` when the check fails.

    Returns:
      :class:`SensitivityReport`.

    Raises:
      ValueError: empty or scalar dataset, bad ``relation``, ``domain`` or sizes.

    Warns:
      SensitivityWarning: the observed change exceeds ``sensitivity``, or
        ``monotonic=True`` and a neighbour moved scores in both directions.

    Examples:
      >>> import jax, jax.numpy as jnp, jaxdp.audit
      >>> def mean_score(data):  # sensitivity depends on n: not 1/len(data)!
      ...     return jnp.stack([jnp.mean(data), -jnp.mean(data)])
      >>> data = jnp.array([0.0, 1.0, 1.0, 0.0])
      >>> report = jaxdp.audit.check_sensitivity(
      ...     mean_score, data, sensitivity=0.25, key=jax.random.key(0),
      ...     domain=(0.0, 1.0), warn=False)
      >>> report.exceeded, round(report.max_change, 4)
      (False, 0.1667)

    References:
      T. Casacuberta, M. Shoemate, S. Vadhan and C. Wagaman, `Widespread
      Underestimation of Sensitivity in Differentially Private Libraries and How
      to Fix It <https://doi.org/10.1145/3548606.3560708>`_, CCS 2022.
    """
    fn = "check_sensitivity"
    key = _checks.single_key(key, fn)
    _checks.positive(fn, sensitivity=sensitivity)
    sensitivity = float(sensitivity)
    relation = _checks.choice(relation, ("add_remove", "replace"), fn, "relation")
    num_random = _checks.static_int(num_random, fn, "num_random", minimum=1)
    num_search_steps = _checks.static_int(num_search_steps, fn, "num_search_steps", minimum=0)
    max_removals = _checks.static_int(max_removals, fn, "max_removals", minimum=0)
    data = jnp.asarray(dataset)
    if data.ndim == 0 or data.shape[0] == 0:
        raise ValueError(f"{fn}: dataset must have shape [m, ...] with m >= 1, got {data.shape}")
    if domain is not None:
        try:
            low, high = (float(v) for v in domain)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{fn}: domain must be (low, high), got {domain!r}") from err
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"{fn}: domain must be finite with low <= high, got {domain!r}")
    m = data.shape[0]
    rec_shape = data.shape[1:]
    integer = jnp.issubdtype(data.dtype, jnp.integer) or data.dtype == jnp.bool_
    base = jnp.ravel(jnp.asarray(score_fn(data)))
    tol = rtol * sensitivity
    state = {"max": -1.0, "worst": "none", "count": 0, "mixed": False}
    work = data.dtype if jnp.issubdtype(data.dtype, jnp.floating) else jnp.float32
    work = jnp.promote_types(work, jnp.float32)
    chunk = _SENSITIVITY_CHUNK

    def evaluate(kind, items, where=None):
        """Changes for neighbours given by ``items`` (removed rows or candidate
        records), in fixed-size chunks: one compilation per kind and dataset."""
        items = np.asarray(items)
        count = len(items)
        pad = -count % chunk
        items = np.concatenate([items, np.repeat(items[-1:], pad, axis=0)])
        if where is not None:
            where = np.concatenate([where, np.repeat(where[-1:], pad)])
        out = []
        for start in range(0, len(items), chunk):
            sl = slice(start, start + chunk)
            extra = None if where is None else jnp.asarray(where[sl])
            change, mixed = _neighbour_changes(
                data, jnp.asarray(items[sl]), extra, base, tol, score_fn=score_fn, kind=kind
            )
            out.append((np.asarray(change, np.float64), np.asarray(mixed)))
        change = np.concatenate([c for c, _ in out])[:count]
        mixed = np.concatenate([m_ for _, m_ in out])[:count]
        state["count"] += count
        state["mixed"] |= bool(np.any(mixed))
        if count and change.max() > state["max"]:
            i = int(np.argmax(change))
            if kind == "remove":
                desc = f"remove record {int(items[i])}"
            elif kind == "add":
                desc = f"add record {np.array2string(items[i])}"
            else:
                desc = f"replace record {int(where[i])} by {np.array2string(items[i])}"
            state["max"], state["worst"] = float(change[i]), desc
        return change

    # Removals.
    if relation == "add_remove":
        if m <= max_removals:
            removed = np.arange(m)
        else:
            key, sub = jax.random.split(key)
            removed = np.asarray(jax.random.choice(sub, m, (max_removals,), replace=False))
        if len(removed):
            evaluate("remove", removed)

    # Candidate records for additions / replacements.
    def clip(recs):
        recs = np.asarray(recs, np.float64)
        if domain is not None:
            recs = np.clip(recs, low, high)
        if integer:
            recs = np.round(recs)
        return recs.astype(data.dtype)

    host = np.asarray(data)
    key, k_perm, k_corner, k_unif, k_where = jax.random.split(key, 5)
    pool = [host[: min(m, num_random)], host.min(axis=0)[None], host.max(axis=0)[None]]
    if m > num_random:
        pool[0] = host[np.asarray(jax.random.permutation(k_perm, m))[:num_random]]
    if domain is not None:
        shape = (max(1, num_random // 2),) + rec_shape
        corners = np.where(np.asarray(jax.random.bernoulli(k_corner, 0.5, shape)), high, low)
        uniform = np.asarray(jax.random.uniform(k_unif, shape, work, minval=low, maxval=high))
        full = [np.full((1,) + rec_shape, v) for v in (low, high)]
        pool += full + [corners, uniform]
    candidates = clip(np.concatenate([np.asarray(p, np.float64) for p in pool]))

    def evaluate_candidates(cands, k):
        if relation == "add_remove":
            return evaluate("add", cands)
        where = np.asarray(jax.random.randint(k, (len(cands),), 0, m))
        return evaluate("replace", cands, where)

    key, sub = jax.random.split(key)
    scores = evaluate_candidates(candidates, sub)
    if domain is not None:
        spread = np.full(rec_shape, max(high - low, 1e-12))
    else:
        spread = np.maximum(host.max(axis=0).astype(np.float64) - host.min(axis=0), 1.0)
    for step in range(num_search_steps):
        top = np.argsort(-scores, kind="stable")[:8]
        parents = candidates[top]
        key, k_pick, k_step, k_eval = jax.random.split(key, 4)
        pick = np.asarray(jax.random.randint(k_pick, (num_random,), 0, len(top)))
        noise = np.asarray(jax.random.normal(k_step, (num_random,) + rec_shape, work))
        proposals = clip(parents[pick].astype(np.float64) + noise * spread * 0.5**step)
        new = evaluate_candidates(proposals, k_eval)
        candidates = np.concatenate([parents, proposals])
        scores = np.concatenate([scores[top], new])

    max_change = max(state["max"], 0.0)
    exceeded = max_change > sensitivity + tol
    monotonic_ok = not state["mixed"]
    violated = bool(monotonic) and not monotonic_ok
    if warn and exceeded:
        warnings.warn(
            f"{fn}: a neighbouring dataset ({state['worst']}) changes a score by "
            f"{max_change:.6g} > declared sensitivity {sensitivity:.6g}; the privacy "
            "guarantee of a mechanism using these scores does not hold",
            SensitivityWarning,
            stacklevel=2,
        )
    if warn and violated:
        warnings.warn(
            f"{fn}: monotonic=True was declared but a neighbouring dataset moves scores "
            "in both directions; use monotonic=False (the factor epsilon / (2 sensitivity))",
            SensitivityWarning,
            stacklevel=2,
        )
    return SensitivityReport(
        max_change=max_change,
        sensitivity=sensitivity,
        exceeded=bool(exceeded),
        worst=state["worst"],
        num_neighbours=state["count"],
        monotonic=monotonic_ok,
        monotonic_violated=violated,
    )
