"""Large-scale Monte Carlo studies: many trials, fixed-size batches, every device.

:func:`run` evaluates a user's ``trial(key, *params) -> pytree of metrics`` over
any number of trials. Trials run in fixed-size batches through one jitted,
sharded step (compiled once per run, never retraced per batch), spread over
every device with :func:`jax.shard_map` on a one-axis :class:`jax.sharding.Mesh`.
Each batch is reduced on the devices to a few numbers per metric (block sums,
min, max, histogram counts) and folded into host accumulators, so memory does
not grow with the number of trials. The result mirrors the metrics' pytree with
a :class:`Summary` (mean, standard error, confidence interval, count, min, max,
histogram) in place of every leaf.

Reproducibility. Trial ``i`` always runs on the key :func:`trial_key` (``key``,
``i``), whatever the batch size, the device count or the process count, and
the reduction order depends only on global trial indices (see :func:`run`), so
one key gives bit-identical summaries on 1 or 8 devices and for any batch size.

Several hosts. Call :func:`jax.distributed.initialize` on every process first,
then call :func:`run` with the same arguments on every process: the mesh spans
``jax.devices()`` (all processes' devices), each device runs its share of each
batch, and every process receives the same, replicated summary, equal field by
field to a one-process run with the same key (tested in CI with 2 processes x 2
CPU devices against 1 x 4 and 1 x 1). jaxdp has no scheduler of its own: launch
the processes with your cluster's tool (SLURM, ``mpirun``, Kubernetes, ...), as
for any multi-host JAX program. One command per host, e.g. for 2 GPU hosts::

    # on every host; PROCESS_ID is 0 on the first host, 1 on the second
    export JAXDP_COORDINATOR=10.0.0.1:12345  # host 0's address, a free port
    python my_study.py --process-id $PROCESS_ID --num-processes 2

    # my_study.py
    jax.distributed.initialize(coordinator_address=os.environ["JAXDP_COORDINATOR"],
                               num_processes=args.num_processes,
                               process_id=args.process_id)
    out = montecarlo.run(trial, jax.random.key(0), 10**10, batch_size=2**24)
    if jax.process_index() == 0:
        save(out)

(on SLURM or Cloud TPU, ``jax.distributed.initialize()`` with no arguments reads
the cluster's environment). On CPU-only hosts JAX needs its CPU collectives,
``jax.config.update("jax_cpu_collectives_implementation", "gloo")`` (the
default from JAX 0.4.3x on).

Cost of several processes. The devices do not talk to each other inside a
batch: each device reduces its own share to per-block sums. With one process the
host reads the shares directly; with several, every batch ends with one
cross-process all-gather of those reductions (a few numbers per block of
:data:`BLOCK_SIZE` trials per metric, plus min, max and histogram counts per
device), so that every process can fold them into the same accumulators.
Measured on loopback CPU (``python -m benchmarks.multihost``: 2 processes x 1
device with gloo against 1 process x 2 devices, a 2-core machine under other
load; ``benchmarks/results/studies/multihost.json``): the all-gather costs
about 15-20 ms per batch, against 0.2-0.3 ms for one process reading its own
devices. For it to stay under 1 % of a batch, a batch must take 1.5-2 s of
device time: about 2**24 trials for the cheapest trial (one uniform draw, ~1.5e7
trials/s per host here), 2**20 for a trial 16 times costlier. So raise
``batch_size`` from the default 65,536 to 2**20-2**24 for multi-host runs (on
GPUs, by the ratio of their throughput); memory grows with it, the results do
not change.
"""

from __future__ import annotations

import functools
import math
import operator
import statistics
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from . import _checks
from ._typing import Array, PRNGKey

__all__ = ["BLOCK_SIZE", "Summary", "run", "trial_key"]

#: Trials per reduction block. Each block is summed by a fixed pairwise tree on
#: the device, and blocks are added on the host in global order, so the result
#: does not depend on the batch size or the device count. Part of the
#: reproducibility contract: changing it changes the last bits of float moments.
BLOCK_SIZE = 256

_AXIS = "trials"


class Summary(NamedTuple):
    """The reduction of one metric over all trials.

    Every array field has the metric's per-trial shape (a scalar metric gives
    0-d values), in float64 on the host.

    Attributes:
      mean: the sample mean.
      stderr: the standard error of the mean, ``std / sqrt(count)``.
      ci_low: lower end of the normal-approximation confidence interval
        ``mean - z * stderr``, ``z`` the two-sided quantile for ``level``.
      ci_high: upper end, ``mean + z * stderr``.
      level: the confidence level of ``[ci_low, ci_high]`` (e.g. 0.95).
      count: the number of trials (padding excluded).
      std: the sample standard deviation (``count - 1`` in the denominator;
        NaN when ``count == 1``).
      min: the smallest value over the trials.
      max: the largest value over the trials.
      histogram: int64 counts of shape ``metric_shape + (num_bins,)`` when bins
        were asked for this metric, else ``None``. Bins follow
        :func:`numpy.histogram`: ``[e_i, e_{i+1})``, the last bin closed; values
        outside the edges (and NaN) are not counted.
      bin_edges: the float64 edges of ``histogram``, or ``None``.
    """

    mean: np.ndarray
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    level: float
    count: int
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    histogram: np.ndarray | None = None
    bin_edges: np.ndarray | None = None


class _BatchStats(NamedTuple):
    """Per-batch reduction of one metric leaf, sharded over devices.

    No collective runs inside the step; with several processes the host gathers
    these shares across processes once per batch (:func:`_to_host`).

    Block arrays concatenate the devices' blocks in device order, which is global
    trial order; the per-device arrays have a leading axis of one row per device.
    """

    block_sum: Array  # [num_blocks, *shape] pairwise sums of each block
    block_mean: Array  # [num_blocks, *shape] block_sum / block_count (0 if empty)
    block_sq: Array  # [num_blocks, *shape] sum of (x - block_mean)^2
    min: Array  # [devices, *shape]
    max: Array  # [devices, *shape]
    nan: Array  # [devices, *shape] bool: a valid trial gave NaN
    hist: Array | None  # [devices, *shape, num_bins] int32


class _Config(NamedTuple):
    """Static configuration of the compiled step (hashable)."""

    mesh: Mesh
    per_device: int  # trials per device per batch, a multiple of BLOCK_SIZE
    bins: tuple[tuple[str, tuple[float, ...]], ...]  # (leaf name, edges)
    key_impl: str  # the PRNG implementation of the study key (its raw data travels)


# ----------------------------------------------------------------------------- keys


def trial_key(key: PRNGKey, index: int) -> PRNGKey:
    """The key that :func:`run` gives to trial ``index``.

    .. math::

        k_i = \\mathrm{fold\\_in}(\\mathrm{fold\\_in}(k, \\lfloor i / 2^{32} \\rfloor),
              \\; i \\bmod 2^{32})

    so any trial of a study can be replayed alone, e.g. to debug an outlier:
    ``trial(trial_key(key, i), *params)``. Indices up to 2**64 - 1 are
    supported, so studies of 10**10 trials and more never reuse a key.

    **Privacy.** Not a mechanism; it only derives PRNG keys.

    Args:
      key: a PRNG key (typed or legacy), the one passed to :func:`run`.
      index: int in ``[0, 2**64)``, the global trial index (``first_trial`` plus
        the position in the run).

    Returns:
      A typed PRNG key of shape ``()``.

    Raises:
      ValueError: a batched or non-key ``key``; ``index`` not an int in range.

    Examples:
      >>> import jax
      >>> from jaxdp import montecarlo
      >>> montecarlo.trial_key(jax.random.key(0), 2**40).shape
      ()

    References:
      J. K. Salmon, M. A. Moraes, R. O. Dror and D. E. Shaw, `Parallel Random
      Numbers: As Easy as 1, 2, 3 <https://doi.org/10.1145/2063384.2063405>`_,
      SC 2011 (the counter-based Threefry generator behind ``fold_in``).
    """
    fn = "trial_key"
    key = _checks.single_key(key, fn)
    index = _checks.static_int(index, fn, "index", minimum=0)
    if index >= 1 << 64:
        raise ValueError(f"{fn}: index must be < 2**64, got {index}")
    hi, lo = np.uint32(index >> 32), np.uint32(index & 0xFFFFFFFF)
    # clone: deriving many trial keys from one study key is intended reuse
    return jax.random.fold_in(jax.random.fold_in(jax.random.clone(key), hi), lo)


def _keys_for(key: PRNGKey, hi: Array, lo: Array, offsets: Array) -> Array:
    """Per-trial keys for global indices ``(hi, lo) + offsets`` (uint32 carry)."""
    lo_i = lo + offsets  # wraps modulo 2**32
    hi_i = hi + (lo_i < lo).astype(jnp.uint32)
    return jax.vmap(lambda h, low: jax.random.fold_in(jax.random.fold_in(key, h), low))(hi_i, lo_i)


# ----------------------------------------------------------------------------- device step


def _leaf_name(path: tuple) -> str:
    parts = []
    for entry in path:
        if isinstance(entry, jax.tree_util.DictKey):
            parts.append(str(entry.key))
        elif isinstance(entry, jax.tree_util.SequenceKey):
            parts.append(str(entry.idx))
        elif isinstance(entry, jax.tree_util.GetAttrKey):
            parts.append(entry.name)
        else:  # FlattenedIndexKey and custom keys
            parts.append(str(getattr(entry, "key", entry)))
    return "/".join(parts)


def _pairwise_sum(x: Array) -> Array:
    """Sums axis 1 (a power of two) by a fixed tree of elementwise adds.

    Halving with slices keeps the association order fixed whatever XLA fuses,
    so a block's sum is bit-identical on every device count and batch size.
    """
    while x.shape[1] > 1:
        half = x.shape[1] // 2
        x = x[:, :half] + x[:, half:]
    return x[:, 0]


def _histogram(x: Array, mask: Array, edges: tuple[float, ...]) -> Array:
    """int32 counts ``[*shape, num_bins]`` of the valid rows of ``x`` ``[T, *shape]``."""
    num_bins = len(edges) - 1
    flat = x.reshape((x.shape[0], -1))
    m = flat.shape[1]
    e = jnp.asarray(edges, x.dtype)
    idx = jnp.searchsorted(e, flat, side="right") - 1
    idx = jnp.where(flat == e[-1], num_bins - 1, idx)  # last bin is closed
    ok = mask[:, None] & (idx >= 0) & (idx < num_bins) & ~jnp.isnan(flat)
    where = jnp.arange(m, dtype=jnp.int32)[None, :] * num_bins + idx.astype(jnp.int32)
    where = jnp.where(ok, where, m * num_bins)  # out of range: dropped
    counts = jnp.zeros((m * num_bins,), jnp.int32).at[where.ravel()].add(1, mode="drop")
    return counts.reshape(x.shape[1:] + (num_bins,))


def _reduce_leaf(x: Array, mask: Array, edges: tuple[float, ...] | None) -> _BatchStats:
    """Per-device reduction of one metric leaf ``x`` ``[T, *shape]``."""
    num_trials, shape = x.shape[0], x.shape[1:]
    nb = num_trials // BLOCK_SIZE
    bmask = mask.reshape((nb, BLOCK_SIZE) + (1,) * len(shape))
    xb = x.reshape((nb, BLOCK_SIZE) + shape)
    zero = jnp.zeros((), x.dtype)
    block_sum = _pairwise_sum(jnp.where(bmask, xb, zero))
    block_count = jnp.sum(mask.reshape((nb, BLOCK_SIZE)), axis=1).astype(x.dtype)
    block_count = block_count.reshape((nb,) + (1,) * len(shape))
    block_mean = jnp.where(block_count > 0, block_sum / jnp.maximum(block_count, 1), zero)
    dev = jnp.where(bmask, xb - block_mean[:, None], zero)
    block_sq = _pairwise_sum(dev * dev)
    inf = jnp.asarray(jnp.inf, x.dtype)
    vmask = mask.reshape((num_trials,) + (1,) * len(shape))
    # XLA's min/max reductions need not propagate NaN: flag NaN explicitly
    has_nan = jnp.any(vmask & jnp.isnan(x), axis=0)
    vmin = jnp.min(jnp.where(vmask, x, inf), axis=0)
    vmax = jnp.max(jnp.where(vmask, x, -inf), axis=0)
    hist = None if edges is None else _histogram(x, mask, edges)[None]
    # no collectives in the step: every device returns its share and the host
    # combines them (a device-side rendezvous per batch would dominate cheap trials on
    # CPU); with several processes the host all-gathers the shares once per batch
    return _BatchStats(
        block_sum=block_sum,
        block_mean=block_mean,
        block_sq=block_sq,
        min=vmin[None],
        max=vmax[None],
        nan=has_nan[None],
        hist=hist,
    )


def _as_metric(leaf: Any, metric: str, trial_name: str) -> Array:
    try:
        arr = jnp.asarray(leaf)
    except TypeError as err:
        raise ValueError(
            f"run: every metric returned by trial must be a real number or array; trial "
            f"{trial_name} returns {metric or 'its output'!r} = {leaf!r}"
        ) from err
    if not (
        jnp.issubdtype(arr.dtype, jnp.integer)
        or jnp.issubdtype(arr.dtype, jnp.floating)
        or arr.dtype == jnp.bool_
    ):
        raise ValueError(
            f"run: every metric returned by trial must be a real number or array; trial "
            f"{trial_name} returns metric {metric or '<its output>'!r} of dtype {arr.dtype}"
        )
    return arr.astype(_checks.compute_dtype())


@functools.lru_cache(maxsize=64)
def _compiled_step(trial: Callable, config: _Config) -> Callable:
    """The jitted, sharded batch step for ``trial`` (cached: one trace per config)."""
    mesh, per_device, bins, key_impl = config
    bins_by_name = dict(bins)
    name = _trial_name(trial)

    def per_device_step(key_data, hi, lo, n_valid, params):
        # the key travels as raw uint32 data: typed keys cannot be turned into the
        # NumPy arrays that a mesh spanning several processes needs
        key = jax.random.wrap_key_data(key_data, impl=key_impl)
        device = jax.lax.axis_index(_AXIS).astype(jnp.uint32)
        offsets = device * np.uint32(per_device) + jnp.arange(per_device, dtype=jnp.uint32)
        mask = offsets < n_valid.astype(jnp.uint32)
        keys = _keys_for(key, hi, lo, offsets)
        metrics = jax.vmap(lambda k: trial(k, *params))(keys)
        leaves, treedef = jax.tree_util.tree_flatten_with_path(metrics)
        names = [_leaf_name(path) for path, _ in leaves]
        if not leaves:
            raise ValueError(f"run: trial {name} returned no metrics (an empty pytree)")
        unknown = sorted(set(bins_by_name) - set(names))
        if unknown:
            raise ValueError(
                f"run: bins names metrics {unknown} that trial {name} does not return; its "
                f"metrics are {names}"
            )
        stats = [
            _reduce_leaf(_as_metric(leaf, metric, name), mask, bins_by_name.get(metric))
            for (_, leaf), metric in zip(leaves, names, strict=True)
        ]
        return jax.tree_util.tree_unflatten(treedef, stats)

    # check_vma=False: a trial is arbitrary code, run per device on that device's
    # keys with no collective inside it; JAX's varying-axes check would reject
    # ordinary trials whose `lax.scan` or `while_loop` starts from a constant carry
    # and updates it from the (device-varying) key. The reductions after it are
    # per-device block statistics, gathered by out_specs alone.
    sharded = jax.shard_map(
        per_device_step,
        mesh=mesh,
        in_specs=(P(), P(), P(), P(), P()),
        out_specs=P(_AXIS),
        check_vma=False,
    )
    return jax.jit(sharded)


# ----------------------------------------------------------------------------- host side


class _Accumulator:
    """Order-fixed float64 accumulation of one metric leaf across batches.

    Block contributions are added left to right in global block order
    (:func:`numpy.add.accumulate` is sequential), so the totals are the same
    whatever the batch boundaries. Squares are accumulated about a fixed shift
    (the mean of the first block), which keeps the variance accurate when the
    mean is much larger than the spread.
    """

    def __init__(self) -> None:
        self.shift: np.ndarray | None = None
        self.total: np.ndarray | None = None
        self.total_sq: np.ndarray | None = None
        self.vmin: np.ndarray | None = None
        self.vmax: np.ndarray | None = None
        self.hist: np.ndarray | None = None

    def add(self, stats: _BatchStats, counts: np.ndarray) -> None:
        used = counts > 0
        extra = (1,) * (np.ndim(stats.min) - 1)  # min is [devices, *shape]
        n = counts[used].astype(np.float64).reshape((-1,) + extra)
        s1 = np.asarray(stats.block_sum, np.float64)[used]
        mu = np.asarray(stats.block_mean, np.float64)[used]
        q = np.asarray(stats.block_sq, np.float64)[used]
        if self.shift is None:
            self.shift = mu[0].copy()
            self.total = np.zeros_like(self.shift)
            self.total_sq = np.zeros_like(self.shift)
            self.vmin = np.full_like(self.shift, np.inf)
            self.vmax = np.full_like(self.shift, -np.inf)
        d = mu - self.shift
        # sum over the block of (x - shift)^2, exactly rearranged
        sq = q + 2.0 * d * (s1 - n * mu) + n * d * d
        self.total = np.add.accumulate(np.concatenate([self.total[None], s1]), axis=0)[-1]
        self.total_sq = np.add.accumulate(np.concatenate([self.total_sq[None], sq]), axis=0)[-1]
        nan = np.any(np.asarray(stats.nan), axis=0)
        vmin = np.where(nan, np.nan, np.min(np.asarray(stats.min, np.float64), axis=0))
        vmax = np.where(nan, np.nan, np.max(np.asarray(stats.max, np.float64), axis=0))
        # np.minimum / np.maximum propagate NaN
        self.vmin = np.minimum(self.vmin, vmin)
        self.vmax = np.maximum(self.vmax, vmax)
        if stats.hist is not None:
            h = np.sum(np.asarray(stats.hist, np.int64), axis=0)
            self.hist = h if self.hist is None else self.hist + h

    def summary(self, count: int, z: float, level: float, edges) -> Summary:
        mean = self.total / count
        centred = self.total_sq - count * (mean - self.shift) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (
                np.maximum(centred, 0.0) / (count - 1) if count > 1 else np.full_like(mean, np.nan)
            )
        std = np.sqrt(var)
        stderr = std / math.sqrt(count)

        def out(a):
            a = np.asarray(a, np.float64)
            return a[()] if a.ndim == 0 else a

        return Summary(
            mean=out(mean),
            stderr=out(stderr),
            ci_low=out(mean - z * stderr),
            ci_high=out(mean + z * stderr),
            level=level,
            count=count,
            std=out(std),
            min=out(self.vmin),
            max=out(self.vmax),
            histogram=self.hist,
            bin_edges=None if edges is None else np.asarray(edges, np.float64),
        )


def _bins_spec(bins: Any, fn: str) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """Canonical ``((name, edges), ...)`` from ``bins`` (see :func:`run`)."""
    if bins is None:
        return ()
    if not isinstance(bins, Mapping):
        bins = {"": bins}
    out = []
    for name, spec in bins.items():
        if not isinstance(name, str):
            raise ValueError(f"{fn}: bins keys must be metric names (str), got {name!r}")
        if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
            k = operator.index(spec)
            if k < 1:
                raise ValueError(f"{fn}: bins[{name!r}] must be >= 1 categories, got {k}")
            edges = tuple(float(e) for e in np.arange(k + 1) - 0.5)
        else:
            try:
                e = np.asarray(spec, np.float64)
            except (TypeError, ValueError) as err:
                raise ValueError(
                    f"{fn}: bins[{name!r}] must be an int or a 1-d array of edges, got {spec!r}"
                ) from err
            if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise ValueError(
                    f"{fn}: bins[{name!r}] must be >= 2 finite, strictly increasing edges, "
                    f"got {spec!r}"
                )
            edges = tuple(float(v) for v in e)
        out.append((name, edges))
    return tuple(sorted(out))


def _progress_bar(progress: bool | None, total: int):
    """A tqdm bar, or None. ``None`` means: on when tqdm exists and stderr is a TTY."""
    if progress is False or jax.process_index() != 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if progress:
            warnings.warn(
                "jaxdp.montecarlo.run: progress=True but tqdm is not installed "
                "(pip install 'jaxdp[progress]'); running without a progress bar",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None
    return tqdm(total=total, unit="trial", unit_scale=True, desc="jaxdp.montecarlo")


def _to_host(tree: Any) -> Any:
    """Device results (sharded over the mesh) as NumPy arrays on every process."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def _replicated(mesh: Mesh, value: Any) -> Any:
    """Arguments as replicated global arrays (needed when the mesh spans processes)."""
    if jax.process_count() == 1:
        return value
    sharding = NamedSharding(mesh, P())
    return jax.tree_util.tree_map(
        lambda v: jax.make_array_from_process_local_data(sharding, np.asarray(v)), value
    )


_MAX_BATCH = 1 << 30


def _trial_name(trial: Callable) -> str:
    name = getattr(trial, "__qualname__", None) or getattr(trial, "__name__", None)
    if name is None and isinstance(trial, functools.partial):
        return f"functools.partial({_trial_name(trial.func)}, ...)"
    return repr(trial) if name is None else name


def _trace_step(step: Callable, trial: Callable, args: tuple, num_params: int, fn: str) -> None:
    """Traces the sharded step once (no FLOPs) and raises a clear ``ValueError``.

    Runs before the progress bar and before any batch, so that a trial with the
    wrong signature or outputs fails at once, naming the trial. The trace is the
    one the first batch reuses (the jit cache), so nothing is traced twice.
    """
    try:
        step.trace(*args)
    except ValueError as err:
        if str(err).startswith(f"{fn}: "):
            raise
        raise ValueError(
            f"{fn}: trial {_trial_name(trial)} raised while being traced as "
            f"trial(key, *params) with {num_params} param(s): {err}"
        ) from err
    except Exception as err:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"{fn}: calling trial {_trial_name(trial)} as trial(key, *params), with one PRNG "
            f"key of shape () and {num_params} param(s), failed while tracing: "
            f"{type(err).__name__}: {err}"
        ) from err


def run(
    trial: Callable[..., Any],
    key: PRNGKey,
    num_trials: int,
    *params: Any,
    batch_size: int = 65536,
    bins: Any = None,
    level: float = 0.95,
    progress: bool | None = None,
    devices: Sequence[jax.Device] | None = None,
    first_trial: int = 0,
) -> Any:
    r"""Runs ``trial`` over ``num_trials`` keys and summarises every metric.

    .. math::

        \bar m = \frac{1}{N}\sum_{i} m(k_i), \qquad
        \mathrm{CI} = \bar m \pm z_{(1+\ell)/2}\, \frac{s}{\sqrt N},
        \qquad k_i = \texttt{trial\_key}(k, \texttt{first\_trial} + i)

    with :math:`s` the sample standard deviation and :math:`\ell` = ``level``
    (a normal-approximation interval; for a rare 0/1 event with few successes
    prefer an exact binomial interval from ``count * mean``).

    **Privacy.** Not a mechanism: a simulation tool. Trials usually *call*
    mechanisms on synthetic data; the summaries are not private releases.

    How it runs. ``jax.vmap(trial)`` runs over a batch of trials inside
    :func:`jax.shard_map` on a one-axis mesh over ``devices``: each device takes
    a contiguous slice of the batch, derives its trials' keys from their global
    indices, and reduces its metrics to block sums, min, max and counts, which the
    host combines (no collective inside the step; with several processes the
    host all-gathers each batch's reductions across processes, see the module
    notes for its cost). The step is jitted once per call (the last,
    partial batch reuses it with the padding masked out of every reduction) and
    cached, so a second call with the same ``trial`` and sizes does not retrace.
    Batches are dispatched one ahead of the host reduction, so devices stay busy.

    Memory. Device memory is that of one batch (``batch_size`` trials and their
    metrics); host memory is a few accumulators per metric element (plus the
    histogram). Neither grows with ``num_trials``.

    Reproducibility. Summaries are bit-identical for any ``batch_size`` and any
    number of devices or processes, provided ``trial`` computes each trial's
    metrics bit-identically whatever the batch (true of elementwise code and of
    jaxdp's samplers; a trial whose own reductions XLA may reorder with the batch
    shape can differ in the last bits). Why: trial ``i`` always gets key
    :func:`trial_key` ``(key, i)``; every block of :data:`BLOCK_SIZE` consecutive
    trials is summed by a fixed pairwise tree on its device; the blocks' sums are
    added on the host in float64, one after another, in global order. Counts,
    histograms, min and max are exact.

    Args:
      trial: ``trial(key, *params) -> metrics``, a JAX-traceable function of one
        PRNG key (shape ``()``) returning a pytree (array, tuple, dict, ...) of
        real or bool arrays of static shapes: the metrics of one trial. Bools
        average to probabilities. Bind static values (sizes, flags) with
        :func:`functools.partial`, ideally once, so the cache can reuse the step.
      key: a PRNG key (typed or legacy) seeding the whole study.
      num_trials: int >= 1, the number of trials (Python int; 10**10 and beyond
        are fine).
      *params: arrays or pytrees of arrays passed to every trial unchanged
        (traced and replicated on every device, so new values do not recompile).
      batch_size: trials per step over all devices, rounded up to a multiple of
        ``BLOCK_SIZE * len(devices)`` (and down to what ``num_trials`` needs).
        Larger batches amortise dispatch; device memory grows with it.
      bins: histograms or counts to keep. ``None``; or, when ``trial`` returns a
        single array, an int ``k`` (counts of the integer values ``0..k-1``) or a
        1-d array of increasing edges; or a mapping from metric name to either.
        A metric's name is its pytree path joined by ``/``: ``"gap"`` for
        ``{"gap": ...}``, ``"1"`` for the second element of a tuple,
        ``"a/b"`` for nested dicts. Binning compares in the compute dtype.
      level: confidence level in (0, 1) of the intervals.
      progress: show a tqdm progress bar. ``None`` (default): when tqdm is
        installed and stderr is a terminal. ``True`` without tqdm warns and runs
        without a bar. Only process 0 shows it.
      devices: the devices to shard over; default ``jax.devices()``: every
        device of every process (after :func:`jax.distributed.initialize`).
      first_trial: int >= 0, the global index of the first trial: running
        ``(N, first_trial=0)`` and ``(M, first_trial=N)`` covers the same trials
        as one run of ``N + M``.

    Returns:
      The pytree of ``trial``'s metrics with a :class:`Summary` in place of each
      leaf (a single :class:`Summary` when ``trial`` returns one array). Float64
      NumPy values; NaN metrics propagate to the mean, min and max.

    Raises:
      ValueError: ``trial`` not callable; a bad key; ``num_trials``,
        ``batch_size`` or ``first_trial`` not ints in range (a step holds at most
        2**30 trials); ``level`` outside (0, 1); bad ``bins``, or bins naming a
        metric that ``trial`` does not return. Before anything runs, ``trial`` is
        traced once with :func:`jax.eval_shape`: a trial that cannot be called as
        ``trial(key, *params)`` or returns something other than real or bool
        arrays raises here, naming the trial and the cause (the original error is
        chained).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxdp import montecarlo
      >>> def trial(key):
      ...     return {"heads": jax.random.bernoulli(key), "one": jnp.ones(())}
      >>> out = montecarlo.run(trial, jax.random.key(0), 10_000, progress=False)
      >>> out["one"].count, float(out["one"].mean), float(out["one"].stderr)
      (10000, 1.0, 0.0)
      >>> bool(abs(out["heads"].mean - 0.5) < 4 * out["heads"].stderr)
      True

    References:
      T. F. Chan, G. H. Golub and R. J. LeVeque, `Algorithms for Computing the
      Sample Variance: Analysis and Recommendations
      <https://doi.org/10.1080/00031305.1983.10483115>`_, The American
      Statistician, 1983 (shifted and pairwise sums).
      JAX documentation, `Distributed arrays and automatic parallelization
      <https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html>`_
      and `Multi-process environments
      <https://docs.jax.dev/en/latest/multi_process.html>`_.
    """
    fn = "run"
    if not callable(trial):
        raise ValueError(f"{fn}: trial must be callable, got {trial!r}")
    key = _checks.single_key(key, fn)
    num_trials = _checks.static_int(num_trials, fn, "num_trials", minimum=1)
    batch_size = _checks.static_int(batch_size, fn, "batch_size", minimum=1)
    first_trial = _checks.static_int(first_trial, fn, "first_trial", minimum=0)
    if first_trial + num_trials > 1 << 64:
        raise ValueError(
            f"{fn}: first_trial + num_trials must be <= 2**64, got {first_trial + num_trials}"
        )
    if isinstance(level, bool) or not (isinstance(level, (int, float, np.floating))):
        raise ValueError(f"{fn}: level must be a number in (0, 1), got {level!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"{fn}: level must be in (0, 1), got {level!r}")
    level = float(level)
    bins_spec = _bins_spec(bins, fn)
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError(f"{fn}: devices must not be empty")
    num_devices = len(devices)

    unit = BLOCK_SIZE * num_devices
    batch = -(-min(batch_size, num_trials) // unit) * unit
    if batch > _MAX_BATCH:
        raise ValueError(
            f"{fn}: batch_size must be <= 2**30 trials per step (the per-step trial counts "
            f"are 32-bit and one batch must fit in device memory), got batch_size="
            f"{batch_size} (num_trials={num_trials}, {num_devices} devices: {batch} per step); "
            f"pass a smaller batch_size, the number of trials is unbounded"
        )
    mesh = Mesh(np.asarray(devices, dtype=object), (_AXIS,))
    key_impl = str(jax.random.key_impl(key))
    step = _compiled_step(trial, _Config(mesh, batch // num_devices, bins_spec, key_impl))
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    edges_by_name = dict(bins_spec)
    params = _replicated(mesh, params)
    # clone: the study key feeds every batch, an intended reuse for jax.debug_key_reuse
    # (each trial's key is still distinct: fold_in of its index)
    key_data = _replicated(mesh, np.asarray(jax.random.key_data(jax.random.clone(key))))
    step_args = (np.uint32(first_trial >> 32), np.uint32(first_trial & 0xFFFFFFFF), np.int32(batch))
    _trace_step(step, trial, (key_data, *_replicated(mesh, step_args), params), len(params), fn)

    accs: list[_Accumulator] | None = None
    treedef = None
    bar = _progress_bar(progress, num_trials)

    def absorb(out, n_valid):
        nonlocal accs, treedef
        leaves, tdef = jax.tree_util.tree_flatten(
            _to_host(out), is_leaf=lambda x: isinstance(x, _BatchStats)
        )
        if accs is None:
            accs = [_Accumulator() for _ in leaves]
            treedef = tdef
        num_blocks = batch // BLOCK_SIZE
        counts = np.clip(n_valid - BLOCK_SIZE * np.arange(num_blocks), 0, BLOCK_SIZE)
        for acc, stats in zip(accs, leaves, strict=True):
            acc.add(stats, counts)
        if bar is not None:
            bar.update(n_valid)

    try:
        pending = None
        done = 0
        while done < num_trials:
            n_valid = min(batch, num_trials - done)
            start = first_trial + done
            args = (
                np.uint32(start >> 32),
                np.uint32(start & 0xFFFFFFFF),
                np.int32(n_valid),
            )
            out = step(key_data, *_replicated(mesh, args), params)
            if pending is not None:
                absorb(*pending)
            pending = (out, n_valid)
            done += n_valid
        absorb(*pending)
    finally:
        if bar is not None:
            bar.close()

    # names in flatten order, to attach the histograms' edges
    names = [
        _leaf_name(path)
        for path, _ in jax.tree_util.tree_flatten_with_path(
            jax.tree_util.tree_unflatten(treedef, [0] * treedef.num_leaves)
        )[0]
    ]
    summaries = [
        acc.summary(num_trials, z, level, edges_by_name.get(name))
        for acc, name in zip(accs, names, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, summaries)
