"""``python -m benchmarks tuning``: the measurements behind ``jaxdp._tuning``'s constants.

Each row names the constant it informs. Two variants of one kernel are timed
alternately in one process (ABBA rounds) and reported as the median of the
per-round ratios; the variants are chosen by overriding the constant for this
backend's kind inside this process (``jaxdp._tuning``'s tables), never by
calling anything else than the public samplers. Rows:

* ``layout_b<B>_n<n>_s<S>``: ``exponential(method="inverse_cdf")`` with each
  layout of the categorical kernel forced on (the descent, the alias table, the
  hybrid), ``S`` draws for each of ``B`` rows, the hybrid timed against each of
  the other two: where each layout pays (``HYBRID``, ``ALIAS_DRAWS_PER_COLUMN``).
* ``layout_rows``: the same rows for several rows per call (the grid's
  ``layout_rows``): where the layouts pay past one row, the draws walked flat
  (``HYBRID["bands"]`` and ``ALIAS_DRAWS_PER_COLUMN`` past one row).
* ``depth_b<B>_n<n>_s<S>``: the same with each depth of the hybrid forced on
  (0, the descent, to the level below the top; by replacing
  ``jaxdp._tuning.hybrid_depth`` in this process), each timed against the
  descent: where the deeper hybrids pay (``HYBRID["deep"]``).
* ``band_b1_n<n>_s<S>``: one row in the hybrid's first band, each deeper depth
  timed against depth 1, with the draws per column of the depth-1 table: where
  depth 2 beats it (``HYBRID["band_deeper_below"]``).
* ``rows_b<B>_n<n>_s<S>``: ``exponential`` under the default layout rule, its
  draws (descent or hybrid) walked flat (``(S * B, 1)``) against walked as
  ``(S, B)``: below how many rows the flat walk pays (``FLAT_BELOW_ROWS``).
* ``block_sums_b<B>_n<n>_s<S>_<dtype>``: ``exponential`` under the default
  layout rule, the leaves' block sums taken by ``K`` strided slices against one
  ``reduce_window``, float32 and int32 scores (and ``block_sums_vmap_*``: a
  ``jax.vmap`` over the rows): from which sizes the slices pay
  (``STRIDED_BLOCK_SUMS``).
* ``int_max_b<B>_n<n>``: ``exponential`` on int32 scores, one draw per row, the
  rows' maxima by strided slices against one ``jnp.max`` (``STRIDED_INT_ROW_MAX``).
* ``block_gather_b<B>_n<n>_s<S>``: ``exponential``, ``S`` draws for each of ``B``
  rows under the default layout rule, the walk's nodes gathered as ``K``-wide
  slices against ``K`` scalar indices (the same values, so the same draws): for
  how many rows the slices pay (``BLOCK_GATHER_MAX_ROWS``).
* ``alias_select_<b|vmap><B>_n<n>_s<S>``: ``exponential`` drawing ``S`` times
  from one row of ``n`` by the alias table (``b1``), or under a ``jax.vmap`` over
  ``B`` rows and keys (``vmap<B>``), the table's columns read by selects
  against gathers (the same draws): up to which table size the selects pay
  (``ALIAS_SELECT_MAX_LOG2``).
* ``prefix_sums_<b|vmap><B>_n<n>_s<S>``: ``exponential`` drawing ``S`` times from
  one row (``b1``) or ``B`` rows (``vmap<B>``: a ``jax.vmap`` over rows and keys)
  under the default layout rule, the alias table's exact prefix sums taken by
  blocked integer products against one ``cumsum`` (the same tables, so the same
  draws): where the products pay (``PREFIX_SUM_BLOCK``).
* ``dot_block_sums_b<B>_n<n>_s<S>``: ``exponential`` (``S`` draws of each of ``B``
  rows, the default layout rule), the leaves' block sums as a product with a
  vector of ones against one ``reduce_window``, and the strided slices against
  the product: which formulation pays where (``DOT_BLOCK_SUMS``, and
  ``STRIDED_BLOCK_SUMS`` against its new alternative).
* ``race_chunk_<c>_b<B>_n<n>_s<S>``: Laplace ``report_noisy_max`` (forced to the race) with
  ``RACE_CHUNK`` = ``c`` against the current value (``RACE_CHUNK``).
* ``table_chunk_<c>_n<n>``: the permute-and-flip table with ``TABLE_CHUNK`` =
  ``c`` against the current value (``TABLE_CHUNK``).
* ``race_variate_ns``, ``table_cost``, ``descent_draw_cost``, ``alias_draw_cost``,
  ``hybrid_draw_cost``, ``conditioned_variate_cost``: the cost model of the
  tabulated noisy max, in units of one race variate (``TABLE_COST``,
  ``KERNEL_DRAW_COST``, ``ALIAS_DRAW_COST``, ``HYBRID_DRAW_COST``, and twice
  ``LAPLACE_BELOW_COST``: a variate of the Laplace table's conditioned race).

Writes ``tuning_<quick|full>.json`` under ``./jaxdp-results/<machine>/`` (or
``--out``; ``--update-committed``: ``benchmarks/results/<machine>/``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp
from jaxdp import _alias, _descent, _tuning

from . import _machine, _paths
from ._timing import compiled_call, time_interleaved

GRID = {
    "quick": {
        "layout": [(1, 1000, (0.25, 1, 4)), (256, 64, (1, 4))],
        "depth": [(1, 10**5, (10**4,))],
        "band": [(1, 10**4, (5000, 16000))],
        "rows": [(4, 10**4, 2000), (12, 1000, 256), (64, 1000, 1000)],
        "layout_rows": [(4, 1000, (0.25, 1)), (12, 1000, (0.5, 1))],
        "block_sums": [(1, 10**5, 1), (64, 4096, 1), (256, 32768, 1), (10**4, 104, 1)],
        "int_max": [(1, 10**5), (256, 32768)],
        "block_gather": [(1, 10**4, 10**4), (12, 10**4, 1024)],
        "alias_select": [(1, 10, 10**4), (1, 10, 10**6), (1, 32, 10**4), (256, 8, 1000)],
        "prefix_sums": [(1, 1000, 10**4), (1, 10**5, 10**4), (12, 1000, 2048)],
        "dot_block_sums": [(1, 10**5, 10**4), (1000, 1000, 1), (10**4, 100, 1)],
        "race": [(1, 1000, 1 << 14), (1024, 1000, 1)],
        "chunks": (1 << 16, 1 << 20),
        "table_n": (512,),
    },
    "full": {
        # (rows B, candidates n, draws per row as multiples of the N = 2**ceil(log2 n) columns)
        "layout": [
            (1, 10, (2, 4, 8, 16)),  # one row, 32 to 256 draws: ALIAS_MIN_DRAWS
            (1, 20, (2, 4, 8)),
            (1, 32, (0.25, 1, 4, 8)),
            (1, 64, (1, 2, 4)),
            (1, 100, (1 / 16, 0.25, 1, 4)),
            (1, 256, (0.25, 1, 2, 4, 8)),
            (1, 512, (0.25, 1, 2)),
            (1, 1000, (1 / 16, 0.25, 1, 2, 4, 8)),
            (1, 1003, (1 / 16, 1 / 8)),  # a partial last block: DOT_PARTIAL_ONE_ROW_MIN_N
            (1, 4096, (0.25, 1, 2, 4, 8)),
            (1, 10000, (1 / 16, 0.25, 1, 4)),
            (1, 65536, (0.25, 1, 2, 4, 8)),
            (2, 1000, (0.25, 1)),
            (2, 4096, (0.25, 0.5)),
            (4, 1000, (0.25, 1, 4)),
            (4, 10000, (0.25, 0.5)),
            (4, 65536, (0.25,)),
            (8, 4096, (0.25,)),
            (16, 1024, (0.25, 1, 2, 4, 8)),
            (256, 256, (0.25, 1, 2, 4)),
            (1024, 32, (0.25, 1, 2, 4, 8)),
        ],
        # (rows B, candidates n, draws per row)
        "depth": [
            (1, 4096, (100, 1000)),
            (1, 10**4, (100, 1000)),
            (1, 10**5, (100, 1000, 10**4)),
            (1, 10**6, (1000, 10**4, 10**5)),
            (4, 4096, (100, 1000)),
            (4, 10**4, (100, 1000)),
            (4, 10**5, (100, 1000, 10**4)),
            (32, 4096, (100, 1000)),
            (32, 10**4, (100, 1000)),
            (32, 10**5, (100, 1000, 10**4)),
        ],
        # one row in the hybrid's first band: depth 1 against the deeper ones
        "band": [
            (1, 5000, (2000, 6000, 8000, 10**4, 12000, 16000)),
            (1, 10**4, (5000, 10**4, 12000, 16000, 24000, 32000, 40000)),
            (1, 30000, (10**4, 24000, 32000, 40000)),
            (1, 10**5, (50000, 10**5)),
        ],
        # (rows B, candidates n, draws per row as multiples of N): several rows
        # (the hybrid's draws walked flat, the descent's below FLAT_BELOW_ROWS)
        "layout_rows": [
            (2, 1000, (0.25, 0.5, 1, 2, 4)),
            (2, 4096, (0.25, 0.5, 1, 2)),
            (3, 1000, (0.25, 0.5, 1, 2)),
            (4, 1000, (0.25, 0.5, 1, 2, 4)),
            (8, 1000, (0.25, 0.5, 1, 2, 4)),
            (8, 4096, (0.25, 0.5, 1, 2)),
            (12, 1000, (0.25, 0.5, 1, 2, 4)),
            (16, 1000, (0.25, 0.5, 1, 2, 4)),
            (16, 4096, (0.25, 0.5, 1, 2)),
            (64, 1000, (0.25, 0.5, 1, 2, 4)),
            (256, 1000, (0.25, 0.5, 1, 2)),
            (4, 256, (0.5, 1, 2)),
            (4, 512, (0.5, 1, 2)),
            (16, 256, (0.5, 1, 2)),
            (16, 512, (0.5, 1, 2)),
            (64, 256, (0.5, 1, 2)),
            (64, 512, (0.5, 1, 2)),
        ],
        # (rows B, candidates n, draws per row): the flat walk against the rows walk
        "rows": [
            (2, 1000, 256),
            (2, 1000, 1024),
            (4, 1000, 256),
            (4, 1000, 1024),
            (4, 10**4, 2000),
            (4, 10**5, 10**4),
            (8, 4096, 1024),
            (8, 4096, 2048),
            (12, 1000, 256),
            (12, 1000, 1024),
            (16, 1024, 256),
            (16, 1024, 1024),
            (32, 10**4, 1000),
            (64, 1000, 100),
            (64, 1000, 1000),
            (256, 256, 64),
        ],
        # (rows B, candidates n, draws per row): the leaves' block sums by strided
        # slices against the reduce_window (float32 and int32 scores, n a multiple of K;
        # each side forced on at every size)
        "block_sums": [
            (1, 10**4, 1),
            (1, 10**5, 1),
            (1, 10**6, 1),
            (1, 2**24, 1),
            (2, 10**5, 1),
            (2, 2**22, 1),
            (3, 10**6, 1),
            (4, 10**4, 1),
            (4, 2**21, 1),
            (8, 10**5, 100),
            (8, 2**20, 1),
            (16, 10**6, 1),
            (12, 1000, 1024),
            (16, 256, 4),
            (32, 1000, 16),
            (64, 4096, 1),
            (64, 10**5, 1),
            (100, 10**4, 1),
            (100, 10**5, 1),
            (128, 32768, 1),
            (256, 4096, 1),
            (256, 32768, 1),
            (300, 30000, 1),
            (512, 8192, 1),
            (1000, 1000, 1),
            (1000, 10**4, 1),
            (1024, 1024, 1),
            (2000, 1000, 1),
            (4096, 256, 1),
            (4096, 4096, 1),
            (10**4, 104, 1),
            (10**4, 1000, 1),
            (40000, 256, 1),
            (50000, 200, 1),
            (60000, 152, 1),
            (65536, 128, 1),
            (10**5, 104, 1),
            (200000, 48, 1),
        ],
        # (rows B, candidates n): the same, jax.vmap over the rows (one draw each)
        "block_sums_vmap": [(1024, 10**4), (10**4, 1000), (256, 32768)],
        # (rows B, candidates n): integer row maxima by strided slices against jnp.max
        "int_max": [
            (1, 1000),
            (1, 10**5),
            (1, 10**6),
            (5, 99999),
            (64, 1003),
            (64, 4096),
            (1000, 1001),
            (256, 32768),
            (10**4, 10),
            (10**4, 1000),
            (10**5, 64),
        ],
        # (rows B, candidates n, draws per row): the walk's slices against scalar gathers
        "block_gather": [
            (1, 4096, 4096),
            (1, 10**4, 2000),
            (1, 10**4, 10**4),
            (1, 10**5, 100),
            (1, 10**5, 10**4),
            (1, 10**6, 10**4),
            (2, 10**4, 1000),
            (12, 10**4, 1024),
        ],
        # (B, n, S): one row (B = 1) or a vmap over B rows, S draws each, by the table
        "alias_select": [(1, n, s) for n in (3, 10, 16, 20, 32, 64) for s in (10**3, 10**4, 10**6)]
        + [(64, 10, 10**4), (10**4, 10, 100), (10**4, 16, 8), (256, 8, 1000), (10**4, 32, 8)],
        # (B, n, S): every layout that builds a table (the alias table, the hybrids)
        "prefix_sums": [(1, n, s) for n in (100, 1000, 10**4) for s in (10**4, 10**6)]
        + [(1, 10**5, 10**4), (1, 10**5, 10**6), (1, 10**6, 10**6)]
        + [(12, 1000, 2048), (256, 1000, 4096), (64, 100, 1000), (4, 10**4, 10**4)],
        # (B, n, S): S draws of each of B rows, one call: one draw per row below and
        # above the strided rule's 2**23 scores, partial last blocks, the hybrids
        "dot_block_sums": [(b, 1000, 1) for b in (100, 1000, 10**4)]
        + [(64, 4096, 1), (100, 10**4, 1), (10**4, 100, 1), (1000, 1001, 1), (1, 10**5, 1)]
        + [(1, 10**6, 1), (1, 10**4, 10**4), (1, 10**5, 10**4), (1, 10**6, 10**4)]
        + [(1, 10**5, 100), (12, 10**4, 1024), (4, 4096, 1000)],
        "race": [(1, 1000, 1 << 16), (1024, 1000, 1), (16, 100, 1 << 12)],
        "chunks": (1 << 14, 1 << 16, 1 << 20, 1 << 22),
        "table_n": (1000, 2048),
    },
}


#: On an accelerator the race's chunk is timed where it matters there: from a
#: million values a step to the current value (one step for most calls), on a
#: row drawn 2**20 times (10**9 noise values a call) as well as the CPU rows.
GPU_GRID = {
    "quick": {
        # W2's shapes (one draw per row): the block sums are most of its time there
        "block_sums": [(10**4, 1000, 1), (10**4, 10**5, 1), (256, 32768, 1)],
        "int_max": [(256, 32768)],
        "block_gather": [(1, 10**4, 10**4), (1, 10**6, 10**4)],
        # the descent takes these sizes on a GPU below 2**18 draws (ALIAS_MIN_DRAWS)
        "alias_select": [(1, 10, 1 << 20), (1, 32, 1 << 20), (64, 10, 1 << 18)],
        "prefix_sums": [(1, 1000, 1 << 20), (1, 10**5, 1 << 20), (64, 1000, 1 << 18)],
        "dot_block_sums": [(10**4, 1000, 1), (1, 10**5, 1 << 20)],
        "race": [(1, 1000, 1 << 14), (1, 1000, 1 << 20), (1024, 1000, 1)],
        "chunks": (1 << 20, 1 << 24),
        "table_n": (512, 2048),
    },
    "full": {
        # the quick shapes, then below the rule's bounds (2026-11-27: 0.94-1.20, launch-bound)
        "block_sums": [(10**4, 1000, 1), (10**4, 10**5, 1), (256, 32768, 1)]
        + [(1, 10**5, 1), (1, 2**20, 1), (64, 4096, 1), (1024, 1000, 1), (10**4, 104, 1)]
        + [(2**16, 128, 1)],
        "int_max": [(256, 32768), (10**4, 1000), (1, 10**6)],
        "block_gather": [(1, 10**4, 10**4), (1, 10**5, 10**4), (1, 10**6, 10**4)]
        + [(12, 10**4, 1024)],
        "alias_select": [(1, n, s) for n in (10, 16, 32, 64) for s in (1 << 18, 1 << 22, 1 << 26)]
        + [(64, 10, 1 << 18), (16, 32, 1 << 20)],
        "prefix_sums": [(1, n, 1 << 20) for n in (1000, 10**4, 10**5, 10**6)]
        + [(64, 1000, 1 << 18), (256, 1000, 1 << 16)],
        "dot_block_sums": [(10**4, 1000, 1), (1000, 1000, 1), (100, 10**4, 1), (1, 10**6, 1)]
        + [(1, 10**5, 1 << 20), (1, 10**6, 1 << 20)],
        "race": [(1, 1000, 1 << 16), (1, 1000, 1 << 20), (1024, 1000, 1), (16, 100, 1 << 12)],
        "chunks": (1 << 20, 1 << 23, 1 << 25, 1 << 29),
        "table_n": (1000, 2048, 4096),
    },
}


@contextlib.contextmanager
def override(table: dict[str, Any], value: Any) -> Iterator[None]:
    """``table[kind] = value`` for this backend's kind, then restored; caches cleared."""
    k = _tuning.kind()
    old = table[k]
    table[k] = value
    jax.clear_caches()
    try:
        yield
    finally:
        table[k] = old
        jax.clear_caches()


def _call(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return compiled_call(fn, args)[0]


#: Seconds a pair of calls is timed for at least (up to 1,000 rounds), by mode:
#: calls of a few hundred microseconds get hundreds of rounds, not ``repeats``
#: (eight rounds of a 0.3 ms call gave ratios from 0.91 to 1.07 between runs of
#: one pair). :func:`run` sets the mode.
MIN_TIME_S = {"quick": 0.5, "full": 1.5}
_mode = "full"


def _pair(a: Callable[[], Any], b: Callable[[], Any], repeats: int) -> dict[str, float]:
    """``a`` and ``b`` timed alternately: at least ``repeats`` rounds and
    :data:`MIN_TIME_S` seconds (within a 4 s budget)."""
    min_time_s = MIN_TIME_S[_mode]
    ta, tb, ratios = time_interleaved(a, b, repeats=repeats, budget_s=4.0, min_time_s=min_time_s)
    return {
        "a_s": statistics.median(ta),
        "b_s": statistics.median(tb),
        "ratio": statistics.median(ratios),
    }


def _pair_values(
    table: dict[str, Any], a: Any, b: Any, fn: Callable[..., Any], args: tuple, repeats: int
) -> dict[str, float]:
    """``fn(*args)`` compiled with ``table`` overridden to ``a`` and to ``b`` (this
    backend's kind), the two timed against each other (:func:`_pair`: ``a`` over ``b``)."""
    with override(table, a):
        call_a = _call(fn, *args)
    with override(table, b):
        call_b = _call(fn, *args)
    return _pair(call_a, call_b, repeats)


def _scores(b: int, n: int) -> jax.Array:
    return jnp.asarray(np.random.default_rng(n).normal(size=(b, n)) * 3.0, jnp.float32)


#: Overrides of ``jaxdp._tuning``'s tables that force each layout of the
#: categorical kernel (:func:`jaxdp._tuning.layout`) for every size.
NO_HYBRID = {"min_n": 0, "bands": ()}
FORCE = {
    "descent": ((_tuning.ALIAS_MIN_DRAWS, ((1, 1 << 62),)), (_tuning.HYBRID, NO_HYBRID)),
    "alias": (
        (_tuning.ALIAS_MIN_DRAWS, ((1, 1),)),
        (_tuning.ALIAS_DRAWS_PER_COLUMN, ((1, 0.0),)),
        (_tuning.HYBRID, NO_HYBRID),
    ),
    "hybrid": ((_tuning.HYBRID, {"min_n": 0, "bands": ((1 << 62, 0.0, 1e300),)}),),
}


def forced(how: str, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """``fn(*args)`` compiled with the categorical kernel's layout forced to ``how``."""
    with contextlib.ExitStack() as stack:
        for table, value in FORCE[how]:
            stack.enter_context(override(table, value))
        return _call(fn, *args)


def layout_rows(grid: dict, repeats: int, key: str = "layout") -> list[dict[str, Any]]:
    """The three layouts of the categorical kernel, each timed against the hybrid, at
    the grid's ``key`` entries (``"layout"``, or ``"layout_rows"`` for several rows)."""
    rows = []
    for b, n, multiples in grid[key]:
        columns = 2 ** max(2, int(np.ceil(np.log2(n))))
        for m in multiples:
            s = max(1, int(m * columns))
            x = _scores(b, n)

            def fn(k, x, s=s, b=b):
                return jaxdp.exponential(
                    k, x, epsilon=1.0, sensitivity=1.0, shape=(s, b), method="inverse_cdf"
                )

            calls = {how: forced(how, fn, jax.random.key(0), x) for how in FORCE}
            vs_descent = _pair(calls["hybrid"], calls["descent"], repeats)
            vs_alias = _pair(calls["hybrid"], calls["alias"], repeats)
            times = {
                "hybrid": statistics.median([vs_descent["a_s"], vs_alias["a_s"]]),
                "descent": vs_descent["b_s"],
                "alias": vs_alias["b_s"],
            }
            name = f"layout_b{b}_n{n}_s{s}"
            chosen = _tuning.layout(n, s, num_rows=b)
            rows.append(
                {"name": name, "constant": "HYBRID, ALIAS_DRAWS_PER_COLUMN",
                 "b": b, "n": n, "s": s, "draws_per_column": s / columns,
                 **{f"{how}_s": t for how, t in times.items()},
                 "hybrid_over_descent": vs_descent["ratio"],
                 "hybrid_over_alias": vs_alias["ratio"],
                 "fastest": min(times, key=times.get), "chosen": chosen}
            )  # fmt: skip
            print(
                f"| {name} | S/N = {s / columns:g} | descent {times['descent'] * 1e3:.3g} ms"
                f" | alias {times['alias'] * 1e3:.3g} ms | hybrid {times['hybrid'] * 1e3:.3g} ms"
                f" | hybrid/descent {vs_descent['ratio']:.2f} | hybrid/alias "
                f"{vs_alias['ratio']:.2f} | rule picks {chosen} |",
                flush=True,
            )
    return rows


@contextlib.contextmanager
def forced_depth(depth: int) -> Iterator[None]:
    """The hybrid's depth (:func:`jaxdp._tuning.hybrid_depth`) forced to ``depth``
    for every call (0: the descent); caches cleared on entry and exit."""
    rule = _tuning.hybrid_depth
    _tuning.hybrid_depth = lambda *args, **kwargs: depth
    jax.clear_caches()
    try:
        yield
    finally:
        _tuning.hybrid_depth = rule
        jax.clear_caches()


def _depth_calls(x: jax.Array, s: int, depths: range) -> dict[int, Callable[[], Any]]:
    """``exponential(method="inverse_cdf")`` drawing ``s`` times from each row of
    ``x`` (``(b, n)``), compiled once per hybrid depth forced (0: the descent)."""

    def fn(k, x):
        return jaxdp.exponential(
            k, x, epsilon=1.0, sensitivity=1.0, shape=(s, x.shape[0]), method="inverse_cdf"
        )

    calls = {}
    for j in depths:
        with forced_depth(j):
            calls[j] = _call(fn, jax.random.key(0), x)
    return calls


def depth_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """Every depth of the hybrid below the top level, each timed against the descent."""
    rows = []
    for b, n, draws in grid["depth"]:
        x = _scores(b, n)
        depths = range(len(_descent.level_counts(n)) - 1)
        for s in draws:
            calls = _depth_calls(x, s, depths)
            pairs = {j: _pair(calls[j], calls[0], repeats) for j in depths if j}
            times = {0: statistics.median([p["b_s"] for p in pairs.values()])}
            times.update({j: p["a_s"] for j, p in pairs.items()})
            fastest = min(times, key=times.get)
            chosen = _tuning.hybrid_depth(n, s, num_rows=b)
            name = f"depth_b{b}_n{n}_s{s}"
            rows.append(
                {"name": name, "constant": 'HYBRID["deep"]', "b": b, "n": n, "s": s,
                 **{f"depth{j}_s": t for j, t in times.items()},
                 **{f"depth{j}_over_descent": p["ratio"] for j, p in pairs.items()},
                 "fastest": fastest, "chosen": chosen,
                 "chosen_over_fastest": times[chosen] / times[fastest]}
            )  # fmt: skip
            cells = " | ".join(f"j{j} {t * 1e3:.3g} ms" for j, t in times.items())
            print(
                f"| {name} | {cells} | fastest j{fastest} | rule picks j{chosen}"
                f" ({times[chosen] / times[fastest]:.2f} of the fastest) |",
                flush=True,
            )
    return rows


def band_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """One row in the hybrid's first band: each deeper depth timed against depth 1
    directly (interleaved), with the draws per column of the depth-1 table."""
    rows = []
    for b, n, draws in grid["band"]:
        x = _scores(b, n)
        depths = range(1, len(_descent.level_counts(n)) - 1)
        per_column = 2 ** _alias.log2_columns(_descent.level_counts(n)[1])
        for s in draws:
            calls = _depth_calls(x, s, depths)
            ratios = {}
            for j in depths:
                if j > 1:
                    _, _, r = time_interleaved(
                        calls[j], calls[1], repeats=repeats, budget_s=8.0, min_time_s=2.0
                    )
                    ratios[j] = statistics.median(r)
            chosen = _tuning.hybrid_depth(n, s, num_rows=b)
            name = f"band_b{b}_n{n}_s{s}"
            rows.append(
                {"name": name, "constant": 'HYBRID["band_deeper_below"]', "b": b, "n": n,
                 "s": s, "draws_per_depth1_column": s / per_column,
                 **{f"depth{j}_over_depth1": r for j, r in ratios.items()}, "chosen": chosen}
            )  # fmt: skip
            cells = " | ".join(f"j{j}/j1 {r:.2f}" for j, r in ratios.items())
            print(
                f"| {name} | {s / per_column:.2g} draws per depth-1 column | {cells}"
                f" | rule picks j{chosen} |",
                flush=True,
            )
    return rows


def rows_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """The categorical kernel's walk (descent or hybrid) flat against by ``(draws,
    rows)``, under the default layout rule (the same draws either way)."""
    out = []
    for b, n, s in grid["rows"]:
        x = _scores(b, n)

        def fn(k, x, s=s, b=b):
            return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0, shape=(s, b))

        flat, by_rows = {"descent": 1 << 62, "hybrid": 1 << 62}, {"descent": 0, "hybrid": 0}
        t = _pair_values(_tuning.FLAT_BELOW_ROWS, flat, by_rows, fn, (jax.random.key(0), x),
                         repeats)  # fmt: skip
        name = f"rows_b{b}_n{n}_s{s}"
        how = _tuning.layout(n, s, num_rows=b)
        out.append(
            {"name": name, "constant": "FLAT_BELOW_ROWS", "b": b, "n": n, "s": s,
             "layout": how, "flat_s": t["a_s"], "rows_s": t["b_s"],
             "flat_over_rows": t["ratio"],
             "flat_by_default": None if how == "alias" else (
                 b < _tuning.FLAT_BELOW_ROWS[_tuning.kind()][how])}
        )  # fmt: skip
        print(
            f"| {name} | {how} | flat {t['a_s'] * 1e3:.3g} ms | (draws, rows) "
            f"{t['b_s'] * 1e3:.3g} ms | flat/rows {t['ratio']:.2f} |",
            flush=True,
        )
    return out


def _block_sums_row(
    name: str,
    how: str,
    b: int,
    n: int,
    s: int,
    dtype: str,
    fn: Callable[..., Any],
    args: tuple,
    repeats: int,
) -> dict[str, Any]:
    """One row of :func:`block_sums_rows`: ``fn(*args)`` with the strided block sums
    forced on against the ``reduce_window`` forced on (``DOT_BLOCK_SUMS`` off in
    both: :func:`dot_block_sums_rows` times the product), timed and printed."""
    strided = {"min_entries": 0, "min_n": 0}
    with override(_tuning.DOT_BLOCK_SUMS, False):
        t = _pair_values(_tuning.STRIDED_BLOCK_SUMS, strided, None, fn, args, repeats)
    print(
        f"| {name} | {how} | strided {t['a_s'] * 1e3:.3g} ms | reduce_window "
        f"{t['b_s'] * 1e3:.3g} ms | strided/reduce_window {t['ratio']:.2f} |",
        flush=True,
    )
    return {"name": name, "constant": "STRIDED_BLOCK_SUMS", "b": b, "n": n, "s": s,
            "dtype": dtype, "layout": how, "strided_s": t["a_s"], "reduce_window_s": t["b_s"],
            "strided_over_reduce_window": t["ratio"],
            "strided_by_default": _tuning.strided_block_sums(b, n, descent=how == "descent"),
            }  # fmt: skip


def block_sums_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """The leaves' block sums by ``K`` strided slices against one ``reduce_window``
    (:func:`jaxdp._descent._leaf_block_sums`), ``exponential`` under the default
    layout rule, float32 and int32 scores (the same draws up to the order of each
    block's additions); then under a ``vmap`` over the rows (``block_sums_vmap``,
    one draw each), where the rule counts the batch."""
    out = []
    for b, n, s in grid["block_sums"]:
        scores = _scores(b, n)  # once a shape: 10**9 normals take seconds on the host
        for dtype in ("float32", "int32"):
            x = jnp.round(scores * 100).astype(jnp.int32) if dtype == "int32" else scores
            shape = (b,) if s == 1 else (s, b)

            def fn(k, x, shape=shape):
                return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0, shape=shape)

            name = f"block_sums_b{b}_n{n}_s{s}_{dtype}"
            how = _tuning.layout(n, s, num_rows=b)
            out.append(_block_sums_row(name, how, b, n, s, dtype, fn, (jax.random.key(0), x),
                                       repeats))  # fmt: skip
    for b, n in grid.get("block_sums_vmap", ()):

        def over_rows(keys, x):
            def one(k, row):
                return jaxdp.exponential(k, row, epsilon=1.0, sensitivity=1.0)

            return jax.vmap(one)(keys, x)

        args = (jax.random.split(jax.random.key(0), b), _scores(b, n))
        name = f"block_sums_vmap_b{b}_n{n}_float32"
        out.append(_block_sums_row(name, "vmap", b, n, 1, "float32", over_rows, args, repeats))
    return out


def dot_block_sums_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """The leaves' block sums three ways, ``exponential`` (``S`` draws of each of ``B``
    rows in one call, the default layout rule): the product with a vector of ones
    (``DOT_BLOCK_SUMS``) against one ``reduce_window``, and the ``K`` strided
    slices (``STRIDED_BLOCK_SUMS`` forced on) against the product; the rules'
    choice beside them. The same sums up to the order of each block's additions."""
    out = []
    forced = {"min_entries": 0, "min_n": 0}
    for b, n, s in grid["dot_block_sums"]:
        x = _scores(b, n)
        shape = (b,) if s == 1 else (s, b)
        if b == 1:
            x, shape = x[0], (s,)

        def fn(k, x, shape=shape):
            return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0, shape=shape)

        args = (jax.random.key(0), x)
        calls = {}
        for name, strided, dot in (("dot", None, True), ("window", None, False),
                                   ("strided", forced, True)):  # fmt: skip
            with (
                override(_tuning.STRIDED_BLOCK_SUMS, strided),
                override(_tuning.DOT_BLOCK_SUMS, dot),
                override(_tuning.DOT_PARTIAL_ONE_ROW_MIN_N, 0),  # the product wherever dot
            ):
                calls[name] = _call(fn, *args)
        dot_window = _pair(calls["dot"], calls["window"], repeats)
        strided_dot = _pair(calls["strided"], calls["dot"], repeats)
        how = _tuning.layout(n, s, num_rows=b)
        default = _tuning.block_sums_by(b, n, descent=how == "descent")
        name = f"dot_block_sums_b{b}_n{n}_s{s}"
        out.append(
            {"name": name, "constant": "DOT_BLOCK_SUMS", "b": b, "n": n, "s": s, "layout": how,
             "dot_s": dot_window["a_s"], "reduce_window_s": dot_window["b_s"],
             "dot_over_reduce_window": dot_window["ratio"], "strided_s": strided_dot["a_s"],
             "strided_over_dot": strided_dot["ratio"], "default": default}
        )  # fmt: skip
        print(
            f"| {name} | {how} | dot {dot_window['a_s'] * 1e3:.3g} ms | reduce_window "
            f"{dot_window['b_s'] * 1e3:.3g} ms | strided {strided_dot['a_s'] * 1e3:.3g} ms "
            f"| dot/reduce_window {dot_window['ratio']:.2f} | strided/dot "
            f"{strided_dot['ratio']:.2f} | default {default} |",
            flush=True,
        )
    return out


def int_max_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """``exponential`` on int32 scores (one draw per row), the rows' maxima taken by
    strided slices against one ``jnp.max`` (the same value, so the same draws)."""
    out = []
    for b, n in grid["int_max"]:
        x = jnp.round(_scores(b, n) * 100).astype(jnp.int32)

        def fn(k, x):
            return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0)

        t = _pair_values(_tuning.STRIDED_INT_ROW_MAX, True, False, fn, (jax.random.key(0), x),
                         repeats)  # fmt: skip
        name = f"int_max_b{b}_n{n}"
        out.append(
            {"name": name, "constant": "STRIDED_INT_ROW_MAX", "b": b, "n": n,
             "strided_s": t["a_s"], "max_s": t["b_s"], "strided_over_max": t["ratio"]}
        )  # fmt: skip
        print(
            f"| {name} | strided {t['a_s'] * 1e3:.3g} ms | jnp.max {t['b_s'] * 1e3:.3g} ms "
            f"| strided/max {t['ratio']:.2f} |",
            flush=True,
        )
    return out


def block_gather_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """``exponential`` (``S`` draws for each of ``B`` rows, the default layout rule),
    the walk's nodes gathered as ``K``-wide slices (``BLOCK_GATHER_MAX_ROWS`` above
    ``B``) against ``K`` scalar indices (below it): the same draws either way."""
    out = []
    for b, n, s in grid["block_gather"]:
        x = _scores(b, n)[0] if b == 1 else _scores(b, n)  # one row: scores (n,)
        shape = (s,) if b == 1 else (s, b)

        def fn(k, x, shape=shape):
            return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0, shape=shape)

        t = _pair_values(_tuning.BLOCK_GATHER_MAX_ROWS, 1 << 31, 0, fn, (jax.random.key(0), x),
                         repeats)  # fmt: skip
        name = f"block_gather_b{b}_n{n}_s{s}"
        how = _tuning.layout(n, s, num_rows=b)
        depth = _tuning.hybrid_depth(n, s, num_rows=b)
        out.append(
            {"name": name, "constant": "BLOCK_GATHER_MAX_ROWS", "b": b, "n": n, "s": s,
             "layout": how, "depth": depth, "slices_s": t["a_s"], "scalar_s": t["b_s"],
             "slices_over_scalar": t["ratio"],
             "slices_by_default": b <= _tuning.BLOCK_GATHER_MAX_ROWS[_tuning.kind()]}
        )  # fmt: skip
        print(
            f"| {name} | {how} {depth} | slices {t['a_s'] * 1e3:.3g} ms "
            f"| scalar {t['b_s'] * 1e3:.3g} ms | slices/scalar {t['ratio']:.2f} |",
            flush=True,
        )
    return out


def _one_row_or_vmap(b: int, n: int, s: int) -> tuple[Callable[..., Any], tuple]:
    """``(fn, args)``: ``exponential`` drawing ``s`` times from one row of ``n`` scores
    (``b = 1``), or under a ``jax.vmap`` over ``b`` such rows and their keys."""
    x = _scores(b, n)

    def one(k, row):
        return jaxdp.exponential(k, row, epsilon=1.0, sensitivity=1.0, shape=(s,))

    if b == 1:
        return one, (jax.random.key(0), x[0])
    return jax.vmap(one), (jax.random.split(jax.random.key(0), b), x)


def alias_select_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """``exponential`` drawing ``S`` times from one row (``B = 1``) or under a
    ``jax.vmap`` over ``B`` rows and keys, with the alias table read by selects
    (``ALIAS_SELECT_MAX_LOG2`` above the table's ``b``) against by gathers (below
    it): the same draws either way. Rows the alias table does not take say so."""
    out = []
    for b, n, s in grid["alias_select"]:
        how = _tuning.layout(n, s)
        log2 = _alias.log2_columns(n)
        fn, args = _one_row_or_vmap(b, n, s)
        t = _pair_values(_tuning.ALIAS_SELECT_MAX_LOG2, 63, -1, fn, args, repeats)
        name = f"alias_select_{'b1' if b == 1 else f'vmap{b}'}_n{n}_s{s}"
        out.append(
            {"name": name, "constant": "ALIAS_SELECT_MAX_LOG2", "b": b, "n": n, "s": s,
             "log2_columns": log2, "layout": how, "select_s": t["a_s"], "gather_s": t["b_s"],
             "select_over_gather": t["ratio"],
             "select_by_default": log2 <= _tuning.ALIAS_SELECT_MAX_LOG2[_tuning.kind()]}
        )  # fmt: skip
        print(
            f"| {name} | {how}, 2**{log2} columns | select {t['a_s'] * 1e3:.3g} ms "
            f"| gather {t['b_s'] * 1e3:.3g} ms | select/gather {t['ratio']:.2f} |",
            flush=True,
        )
    return out


def prefix_sums_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """``exponential`` drawing ``S`` times from one row (``B = 1``) or under a
    ``jax.vmap`` over ``B`` rows and keys, the alias table's prefix sums taken by
    blocked integer products (``PREFIX_SUM_BLOCK`` = 16) against one ``cumsum``
    (0): the same tables, so the same draws. Rows whose layout builds no table
    say so (the two compile to the same program there). A backend that cannot
    compile the int32 products (unmeasured on a GPU) gets a row with ``error``,
    and the section goes on."""
    out = []
    for b, n, s in grid["prefix_sums"]:
        how = _tuning.layout(n, s)
        fn, args = _one_row_or_vmap(b, n, s)
        name = f"prefix_sums_{'b1' if b == 1 else f'vmap{b}'}_n{n}_s{s}"
        try:
            t = _pair_values(_tuning.PREFIX_SUM_BLOCK, 16, 0, fn, args, repeats)
        except Exception as e:  # an int32 product a backend cannot compile: say so, go on
            out.append({"name": name, "constant": "PREFIX_SUM_BLOCK", "b": b, "n": n, "s": s,
                        "layout": how, "error": f"{type(e).__name__}: {e}"[:500]})  # fmt: skip
            print(f"| {name} | {how} | products failed: {type(e).__name__} |", flush=True)
            continue
        out.append(
            {"name": name, "constant": "PREFIX_SUM_BLOCK", "b": b, "n": n, "s": s,
             "layout": how, "dot_s": t["a_s"], "cumsum_s": t["b_s"], "dot_over_cumsum": t["ratio"],
             "block_by_default": _tuning.PREFIX_SUM_BLOCK[_tuning.kind()]}
        )  # fmt: skip
        print(
            f"| {name} | {how} | products {t['a_s'] * 1e3:.3g} ms "
            f"| cumsum {t['b_s'] * 1e3:.3g} ms | products/cumsum {t['ratio']:.2f} |",
            flush=True,
        )
    return out


def race_chunk_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    rows = []
    current = _tuning.race_chunk()
    for b, n, s in grid["race"]:
        x = _scores(b, n)

        def fn(k, x, s=s, b=b):
            return jaxdp.report_noisy_max(
                k, x, epsilon=1.0, sensitivity=1.0, noise="laplace", shape=(s, b)
            )

        with override(_tuning.TABLE_MAX_CANDIDATES, 0):  # the race, never the table
            base = _call(fn, jax.random.key(0), x)
            others = {}
            for c in grid["chunks"]:
                with override(_tuning.RACE_CHUNK, c):
                    others[c] = _call(fn, jax.random.key(0), x)
        for c in grid["chunks"]:
            r = _pair(others[c], base, repeats)
            name = f"race_chunk_{c}_b{b}_n{n}_s{s}"
            rows.append(
                {"name": name, "constant": "RACE_CHUNK", "chunk": c, "current": current,
                 "b": b, "n": n, "s": s, "chunk_s": r["a_s"], "current_s": r["b_s"],
                 "chunk_over_current": r["ratio"],
                 "variates_per_s": s * b * n / r["b_s"]}
            )  # fmt: skip
            print(
                f"| {name} | {r['a_s'] * 1e3:.3g} ms | current ({current}) "
                f"{r['b_s'] * 1e3:.3g} ms | ratio {r['ratio']:.2f} |",
                flush=True,
            )
    return rows


def table_chunk_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    from jaxdp import _tabulated

    rows = []
    current = _tuning.table_chunk()
    for n in grid["table_n"]:
        p = jnp.asarray(np.random.default_rng(n).uniform(0.01, 1.0, size=(1, n)), jnp.float32)
        base = _call(_tabulated.flip_table, p)
        for c in grid["chunks"]:
            with override(_tuning.TABLE_CHUNK, c):
                other = _call(_tabulated.flip_table, p)
            r = _pair(other, base, repeats)
            name = f"table_chunk_{c}_n{n}"
            rows.append(
                {"name": name, "constant": "TABLE_CHUNK", "chunk": c, "current": current,
                 "n": n, "chunk_s": r["a_s"], "current_s": r["b_s"],
                 "chunk_over_current": r["ratio"]}
            )  # fmt: skip
            print(
                f"| {name} | {r['a_s'] * 1e3:.3g} ms | current ({current}) "
                f"{r['b_s'] * 1e3:.3g} ms | ratio {r['ratio']:.2f} |",
                flush=True,
            )
    return rows


def cost_rows(grid: dict, repeats: int) -> list[dict[str, Any]]:
    """The tabulated noisy max's cost model, in race variates."""
    from jaxdp import _tabulated

    n, s = 1000, 1 << 13
    x = _scores(1, n)[0]
    key = jax.random.key(0)

    def race(k, x):
        return jaxdp.report_noisy_max(
            k, x, epsilon=1.0, sensitivity=1.0, noise="exponential", shape=(s,)
        )

    with override(_tuning.TABLE_MAX_CANDIDATES, 0):
        t_race = min(time_interleaved(_call(race, key, x), lambda: None, repeats=repeats,
                                      budget_s=4.0)[0])  # fmt: skip
    variate = t_race / (s * n)
    rows: list[dict[str, Any]] = [
        {"name": "race_variate_ns", "constant": "(unit)", "value": variate * 1e9, "n": n, "s": s}
    ]
    for m in grid["table_n"]:
        p = jnp.asarray(np.random.default_rng(m).uniform(0.01, 1.0, size=(1, m)), jnp.float32)
        t = min(time_interleaved(_call(_tabulated.flip_table, p), lambda: None,
                                 repeats=repeats, budget_s=4.0)[0])  # fmt: skip
        rows.append({"name": f"table_cost_n{m}", "constant": "TABLE_COST",
                     "value": t / (m * m) / variate, "n": m})  # fmt: skip
    w = jnp.exp(_scores(1, n))

    def draws(how: str, num: int) -> Callable[[], Any]:
        return forced(how, lambda k, w: _descent.sample(k, w, num)[0], key, w)

    for how, constant, few, many in (
        ("descent", "KERNEL_DRAW_COST", 1 << 8, 1 << 14),
        ("alias", "ALIAS_DRAW_COST", 1 << 16, 1 << 20),
        ("hybrid", "HYBRID_DRAW_COST", 1 << 12, 1 << 16),
    ):
        t_few, t_many, _ = time_interleaved(draws(how, few), draws(how, many), repeats=repeats,
                                            budget_s=4.0)  # fmt: skip
        per_draw = (min(t_many) - min(t_few)) / (many - few)
        rows.append(
            {"name": f"{how}_draw_cost", "constant": constant, "value": per_draw / variate, "n": n}
        )
    # Every draw below the top score: the conditioned race's cost per variate.
    acc = jax.jit(_tabulated.acceptance)(x[None], jnp.max(x)[None], jnp.float32(0.5))
    below = jnp.full((s, 1), n, jnp.int32)
    t_below = min(time_interleaved(_call(_tabulated._below_top, key, acc, below), lambda: None,
                                   repeats=repeats, budget_s=4.0)[0])  # fmt: skip
    rows.append({"name": "conditioned_variate_cost", "constant": "2 LAPLACE_BELOW_COST",
                 "value": t_below / (s * n) / variate, "n": n})  # fmt: skip
    for r in rows:
        print(f"| {r['name']} | {r['constant']} | {r['value']:.3g} |", flush=True)
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m benchmarks tuning``."""
    p.add_argument("--quick", action="store_true", help="a few points of each sweep")
    p.add_argument(
        "--only",
        choices=(
            "layout",
            "layout_rows",
            "depth",
            "band",
            "rows",
            "block_sums",
            "int_max",
            "block_gather",
            "alias_select",
            "prefix_sums",
            "dot_block_sums",
            "race_chunk",
            "table_chunk",
            "costs",
        ),
        action="append",
        help="run only these sections (repeatable; default: all)",
    )
    _paths.add_output_arguments(p, "<machine>")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks tuning", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(list(sys.argv[1:] if argv is None else argv)))


def run(args: argparse.Namespace) -> int:
    """Runs the sections, prints one line per row, writes ``tuning_<mode>.json``."""
    global _mode
    mode = _mode = "quick" if args.quick else "full"
    grid = GRID[mode] if _tuning.kind() == "cpu" else {**GRID[mode], **GPU_GRID[mode]}
    repeats = 4 if args.quick else 8
    sections = {
        "layout": layout_rows,
        "layout_rows": functools.partial(layout_rows, key="layout_rows"),
        "depth": depth_rows,
        "band": band_rows,
        "rows": rows_rows,
        "block_sums": block_sums_rows,
        "int_max": int_max_rows,
        "block_gather": block_gather_rows,
        "alias_select": alias_select_rows,
        "prefix_sums": prefix_sums_rows,
        "dot_block_sums": dot_block_sums_rows,
        "race_chunk": race_chunk_rows,
        "table_chunk": table_chunk_rows,
        "costs": cost_rows,
    }
    rows: list[dict[str, Any]] = []
    for name, fn in sections.items():
        if args.only and name not in args.only:
            continue
        print(f"\n## {name}\n", flush=True)
        rows += fn(grid, repeats)
    backend = jax.default_backend()
    info = _machine.machine_info()
    out = _paths.output_dir(args.out, args.update_committed, _machine.slug(info, backend))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"tuning_{mode}.json"
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    command = "python -m benchmarks tuning" + (" --quick" if args.quick else "")
    payload = {"created": created, "command": command, "backend": backend, "machine": info,
               "rows": rows}  # fmt: skip
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {path}")
    return 0
