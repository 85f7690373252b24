"""Every tuning constant of the kernels, and the rules that use them, per backend.

A tuning constant decides *how* a kernel computes, never *what* it samples: how
many noise values a step of a chunked loop holds, or which of two sound kernels
runs for given static shapes. Every choice here is a function of static shapes
and of the platform only (never of the data), each kernel it picks is exact in
law and states its own finite-precision guarantee, and a rule that picks between
two kernels is covered by the guarantee the public docstring states for the
pair. Constants that enter a privacy guarantee stay beside their proof and are
*not* tuning constants: :data:`jaxdp._descent.K` and
:data:`~jaxdp._descent.SHARE_FLOOR`, ``LOGIT_FLOOR`` and ``SCALE_ROUND_DOWN``
(:mod:`jaxdp._noisy_kernels`, :mod:`jaxdp._measure`, :mod:`jaxdp._tabulated`),
:data:`jaxdp._tabulated.PRODUCT_FLOOR`, :data:`jaxdp._alias.MAX_LOG2_COLUMNS`
(the alias table's error bound is derived up to it),
:data:`jaxdp._additive.NOISE_RESOLUTION` and the truncation of
:func:`jaxdp.select_private_candidate`. :data:`jaxdp.montecarlo.BLOCK_SIZE` is
part of Monte Carlo's reproducibility contract (the float moments depend on it),
not a speed knob.

Backends. Each constant is a table ``{"cpu": ..., "gpu": ...}``; ``"gpu"``
stands for every accelerator (CUDA, ROCm, TPU). The CPU values are measured
(2-core AMD EPYC, jax 0.10.2; each constant names the command whose output holds
the measurement). The GPU values were chosen by reasoning, so that no path
serialises into thousands of small steps: a GPU kernel launch costs ~5 us and a
``lax.map``/``scan`` step at least one launch (a ``while`` loop also a
device-to-host copy of its predicate), while an H100 draws ~1e11 noise values/s,
so a step should hold 10**7-10**8 values (milliseconds of work), not a cache's
2**18 (a few microseconds). ``python -m benchmarks tuning --quick`` and
``crossover --quick`` have since run once on an H100 (jax 0.11.2; committed in
``benchmarks/results/gpu-nvidia-h100-80gb-hbm3/``, the command is
``benchmarks/device_check.sh``): they confirm :data:`RACE_CHUNK` and
:data:`TABLE_CHUNK` (each names its rows). They also showed that the CPU's
layout rules do not suit a GPU. On the H100 the descent took 0.35-0.52 of the
time of the hybrid and 0.27-0.41 of the alias table's for 1 row of 1000
outcomes drawn a quarter to four times per column and for 256 rows of 64
(``layout_*``), and 0.41 of the time of the depth-2 hybrid the CPU's rule picks
at one row of 10**5 drawn 10**4 times (``depth_*``). So on a GPU the descent
takes every call up to 2**18 draws per row (:data:`ALIAS_MIN_DRAWS`), and the
hybrids none (:data:`HYBRID`).

Where the backend is read. Rules take ``platform`` (``"cpu"``, ``"cuda"``,
``"rocm"``, ``"tpu"``, or a kind); ``None`` means ``jax.default_backend()`` at
trace time. Where the two kinds' values give different programs *and* the call
may be lowered for a platform other than the default one (``jax.export``, a CPU
device on a GPU host), the kernel goes through :func:`staged`, which stages one
program per kind with :func:`jax.lax.platform_dependent`; the compiler only ever
sees the branch of the platform it compiles for. :func:`layout` and
:func:`hybrid_depth` differ between the kinds, and the categorical kernel stages
them (:func:`jaxdp._descent.sample`). The other rules that choose between kernels
(:func:`choose_method`, :func:`selection_block`, and :func:`use_table` for
exponential noise) give the same answer on both kinds, so reading the
default backend is exact for them (:func:`use_table` prices its draws with the
CPU's layout on both). For Laplace noise :func:`use_table` differs (the GPU
draws by the race: :data:`LAPLACE_BELOW_COST`), and ``report_noisy_max`` stages
that choice; a rule made to differ must be staged too.

Draws. A chunked loop splits its key once per step, so for a fixed key the
draws depend on the chunking, hence on the backend (the design allows this:
across CPU and GPU the law is the same, the draws may differ). On a GPU the
layout rules of 2026-11-26 changed the draws of the categorical kernel. On CPU
the layout rules re-measured for several rows (2026-11-26) and
:data:`STRIDED_BLOCK_SUMS` (2026-11-27: the order of each block's additions, so
a draw whose uniform falls within the last bits of a block's sum) changed some
draws of the calls they newly take; the law and its guarantee are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import jax

from . import _alias, _tracing

#: The platform kinds that have their own values.
KINDS = ("cpu", "gpu")


def kind(platform: str | None = None) -> str:
    """``"cpu"`` or ``"gpu"`` (any accelerator) for ``platform`` (default: the
    default backend, read at trace time)."""
    platform = jax.default_backend() if platform is None else platform
    return "cpu" if platform == "cpu" else "gpu"


def staged(plan: Callable[[str], Hashable], build: Callable[[Any], Callable], *args: Any) -> Any:
    """``build(plan(kind))(*args)`` for the kind of the platform the program runs on.

    ``plan(kind)`` is the static plan (chunk sizes, step counts) a kernel follows
    on ``kind``; ``build(plan)`` the function that computes with it. When the
    plans agree (small problems) the kernel is traced once; otherwise once per
    kind, under :func:`jax.lax.platform_dependent`, which keeps only the branch
    of the platform it is lowered for.
    """
    cpu, gpu = plan("cpu"), plan("gpu")
    if cpu == gpu:
        return build(cpu)(*args)

    def branch(p: Hashable) -> Callable:
        fn = build(p)

        def run(*xs: Any) -> Any:  # under shard_map the branches' outputs must agree
            return _tracing.varying_like(fn(*xs), *xs)

        return run

    return jax.lax.platform_dependent(*args, cpu=branch(cpu), default=branch(gpu))


# ----------------------------------------------------------------------------- chunks

#: Noise values (draws x rows x candidates) live at once in the race of
#: :func:`jaxdp._noisy_kernels.noisy_argmax` and :func:`jaxdp._measure.race`;
#: rows longer than this are scanned in blocks of this many candidates. Trades
#: the cache (small chunks stay in L2 while the noise is generated, multiplied
#: and reduced) against the per-step cost of the ``lax.map`` over chunks. CPU:
#: 1 MiB of float32, inside L2 (``python -m benchmarks tuning``, rows
#: ``race_chunk_*``). GPU: 2**27 values, 512 MiB per float32 array
#: (a few arrays of that size live at once, well inside 80 GB): a (100000, 1000)
#: Gumbel call is one step, 10**6 draws over n = 1000 eight, each ~1e8 values,
#: milliseconds against a launch's microseconds. Measured on an H100
#: (``tuning_quick.json`` in ``benchmarks/results/gpu-nvidia-h100-80gb-hbm3/``,
#: rows ``race_chunk_*``): 2**20 takes 1.64-2.36 and 2**24 1.02-1.25 times as long
#: as 2**27, at 1 row drawn 2**14 and 2**20 times and 1024 rows drawn once (n =
#: 1000; 1.6e11 Laplace variates/s at 2**20 draws).
RACE_CHUNK = {"cpu": 1 << 18, "gpu": 1 << 27}

#: Elements (rows x quadrature nodes x candidates) of the factor arrays computed
#: per step of the permute-and-flip table (:func:`jaxdp._tabulated.flip_integrals`,
#: a ``scan`` over blocks of nodes; about six double-float arrays of this size
#: live at once). CPU: 2 MiB of float32 per array (``python -m benchmarks
#: tuning``, rows ``table_chunk_*``). GPU: 2**26, 256 MiB per array: a row of the
#: largest tabulated size (4096 candidates, 2048 nodes) is one step. On an H100
#: (same rows, ``gpu-nvidia-h100-80gb-hbm3/``) 2**20 and 2**24 take 0.88-1.37 of
#: its time at n = 512 and 2048, all within 0.25 ms: launch-bound, no winner.
TABLE_CHUNK = {"cpu": 1 << 19, "gpu": 1 << 26}


def race_chunk(platform: str | None = None) -> int:
    """:data:`RACE_CHUNK` for ``platform``."""
    return RACE_CHUNK[kind(platform)]


def table_chunk(platform: str | None = None) -> int:
    """:data:`TABLE_CHUNK` for ``platform``."""
    return TABLE_CHUNK[kind(platform)]


# ----------------------------------------------------------------------------- alias table

#: The alias table is built when each row gets at least ``c * N`` draws, ``N =
#: 2**b >= n`` its columns and ``c`` the draws per column of the last ``(rows,
#: c)`` entry whose ``rows`` the call reaches (where :data:`HYBRID` does not take
#: the call first). Trades the table's construction (two exact fixed-point
#: prefix sums and two binary searches over the columns) against the descent's
#: per-draw walk (a K-lane gather, a sorting network and a 64-bit uniform per
#: level; dearer per draw for many rows, whose levels no longer stay in cache),
#: which the table replaces by O(1) work. CPU: ``python -m benchmarks tuning
#: --only layout`` (rows ``layout_b<B>_n<n>_s<S>`` in ``benchmarks/results/
#: cpu-2core-amd-epyc/layout/``): one row of 32-512 outcomes takes the table
#: from a quarter draw per column (table/descent 0.70-1.08 there, 0.43-0.61 at
#: one draw per column); 16 to 1024 rows then took it from one (0.84-0.91 there,
#: 2.3-4.1 at a quarter; also in ``alias-fixed-point/``), on the walk by
#: ``(draws, rows)`` of then. Re-measured with the draws walked flat (``--only
#: layout_rows``, in ``benchmarks/results/cpu-2core-intel-xeon/layout-rows/``),
#: several rows take the table from two draws per column: below 1000 outcomes
#: (where no hybrid is built; 4 to 64 rows of 256 and 512) the descent took
#: 0.31-0.84 of the table's time at a half, 0.57-0.96 at one and 1.06-1.43 at
#: two; from 1000 the hybrid's band takes a half to four first. GPU: one draw
#: per column, above :data:`ALIAS_MIN_DRAWS` (which decides below 2**18
#: outcomes); neither kernel serialises (the descent's levels are at most 8 loop
#: steps, the table's searches ``b + 1``).
ALIAS_DRAWS_PER_COLUMN = {
    "cpu": ((1, 0.25), (2, 2.0)),
    "gpu": ((1, 1.0),),
}

#: Fewest draws per row for which the alias table is considered at all (below
#: it the descent's few levels are cheaper than any table), as ``(rows, draws)``
#: entries read like :data:`ALIAS_DRAWS_PER_COLUMN`'s. CPU: 128 for one row (a
#: ``vmap`` over rows traces one), 8 for several. One row of 10 to 1000
#: outcomes drawn 32 to 128 times took the descent in 0.37-0.94 of the table's
#: time (``benchmarks/results/cpu-2core-amd-epyc/layout-one-row/
#: descent_vs_alias.txt``; 0.25-0.33 at 32 outcomes in a full run of ``tuning
#: --only layout`` before, ``layout-one-row/tuning_full_before.json``), where the
#: rule of 8 draws and a quarter per column gave those calls the table; from 192
#: to 256 draws the table wins above 100 outcomes (1.1-1.6), and a ``vmap`` over
#: 1024 rows of 32 drawn 128 times was 1.49 times slower by the descent, so the
#: table keeps 128 draws and more. Side by side with the rule before (with
#: :data:`DOT_PARTIAL_ONE_ROW_MIN_N`): 0.41-0.81 of its time on one row of 10 to
#: 1003 drawn 16 to 120 times, 1.00 where neither rule changes the call,
#: 0.30-0.87 under ``vmap``s over 64 to 1024 rows of 32 to 256 drawn 64 times,
#: and 1.15 (a loss) under a ``vmap`` over 4096 rows of 10 drawn 32 times
#: (``layout-one-row/rules_side_by_side.txt``). The full ``--only layout`` grid
#: after the change, with one-row cells of 10 to 1003 outcomes added
#: (``layout-one-row/tuning_full.json``): below 128 draws the descent was the
#: fastest layout in every one-row cell; at 128 it took 0.65-0.89 of the table's
#: time, and at 256 the table took 0.61-0.83 of the descent's. GPU: 2**18.
#: On an H100 a call is bound by its kernel launches: the descent took 0.20-0.34
#: ms for up to 10**4 draws per row (``layout_*`` and ``depth_*`` rows in
#: ``benchmarks/results/gpu-nvidia-h100-80gb-hbm3/tuning_quick.json``) and about
#: 1.05 ns more per draw at n = 1000 (row ``descent_draw_cost``, 45 variates of
#: 0.023 ns), while the table cost 0.49-1.11 ms whatever the draws (0.46-0.81 ms in
#: the ``layout_*`` rows; 0.49, 0.55 and 1.11 ms for 10**6 draws over 10, 10**3
#: and 10**5 outcomes, W1 in ``results_quick.json``). The two meet near 3e5 draws
#: at n = 1000 and 5e5 at n = 10**5: an estimate from those rows, not yet timed at
#: the crossover itself. Above 2**18 outcomes the GPU, like the CPU's many rows,
#: also asks one draw per column.
ALIAS_MIN_DRAWS = {"cpu": ((1, 128), (2, 8)), "gpu": ((1, 1 << 18),)}


def use_alias(n: int, num_draws: int, platform: str | None = None, num_rows: int = 1) -> bool:
    """Alias table (rather than the descent) for ``num_draws`` draws per row of ``n``,
    ``num_rows`` rows, before the hybrid is considered (:func:`layout`).

    Both are sound; :func:`jaxdp._descent.guarantee` states the larger of their
    bounds wherever the table may be used, so this choice never changes it.
    """
    k = kind(platform)
    b = _alias.log2_columns(n)
    if b > _alias.MAX_LOG2_COLUMNS:
        return False
    per_column = [c for rows, c in ALIAS_DRAWS_PER_COLUMN[k] if num_rows >= rows][-1]
    fewest = [m for rows, m in ALIAS_MIN_DRAWS[k] if num_rows >= rows][-1]
    return num_draws >= max(fewest, per_column * 2**b)


#: The hybrid layout (an alias table over the descent's leaf blocks of ``K``, then
#: the descent's last level) is used for rows of at least ``min_n`` outcomes when
#: ``lo N <= draws per row < hi N``, ``N = 2**b >= n`` the full table's columns,
#: for the first ``(rows, lo, hi)`` band whose ``rows`` is at least the call's.
#: It builds a table a ``K``-th the size of the full one and pays one ``K``-lane
#: choice per draw, so it wins where the full table's build is not yet repaid
#: and the descent's levels cost more than one. CPU: ``python -m benchmarks
#: tuning --only layout`` (rows ``layout_b<B>_n<n>_s<S>``, in ``benchmarks/
#: results/cpu-2core-amd-epyc/layout/``): one row of 1000 to 65536 outcomes drawn
#: from a quarter to two times per column, hybrid/best other 0.44-1.0 (it ties
#: the table at n = 1000 and two draws per column); at four it ties or beats the
#: table (0.76-1.09), at eight it loses (1.34-2.01); below 1000 outcomes the
#: table wins (hybrid/table 1.19-2.1 at 256 and 512). Several rows (the
#: hybrid's draws walked flat at any count, :data:`FLAT_BELOW_ROWS`): ``python -m
#: benchmarks tuning --only layout_rows`` (rows ``layout_b<B>_n<n>_s<S>`` in
#: ``benchmarks/results/cpu-2core-intel-xeon/layout-rows/``, 2 to 256 rows of
#: 1000 or 4096 outcomes): the hybrid ties the descent at a quarter draw per
#: column (0.94-1.30) and is the fastest from a half to two (hybrid/descent
#: 0.71-0.97 at a half, 0.49-0.88 at one, 0.44-0.84 at two; hybrid/table
#: 0.29-0.81); at four it still beats the table at up to 12 rows (0.74-0.87),
#: not at 16 or more (1.04-1.20). Below 1000 outcomes (256 and 512, 4 to 64
#: rows) it wins at two draws per column (0.57-0.81) but not at a half
#: (0.87-1.22): ``min_n`` keeps it out there. Side by side with the rules before
#: (a band of 2 to 8 rows at a quarter to a half, the table from a half at 2 to
#: 4 rows and from one past that), on the changed shapes of 2 to 64 rows over
#: 512 to 4096 outcomes: 0.45-0.94 of their time on 41 of the 44, 1.05-1.09 on
#: three of two rows (``benchmarks/results/cpu-2core-intel-xeon/layout-rows/
#: rules_side_by_side.txt``). A ``vmap`` over rows traces one row.
#:
#: ``deep`` ``(rows, min_n, min_draws, c)``: deeper hybrids (:func:`hybrid_depth`),
#: a table over level ``j >= 2`` of the descent and ``j`` levels below it, for
#: calls of at most ``rows`` rows that would otherwise take the descent. CPU:
#: ``python -m benchmarks tuning --only depth`` (rows ``depth_b<B>_n<n>_s<S>`` in
#: ``benchmarks/results/cpu-2core-amd-epyc/depth/``, each depth timed against
#: the descent): at 1, 4 and 32 rows of 4096 to 10**6 outcomes drawn 1000 to
#: 10**5 times per row, the smallest depth whose table gets two draws per column
#: takes 0.43-0.96 of the descent's time (0.77 at one row of 10**5 drawn 10**4
#: times, issue 11's C4, where depth 3 is within 2% of it over 2,500 rounds;
#: 0.56 at one row of 10**6 drawn 10**5 times) and is within 1.38 of the
#: fastest depth. A first run of the grid (before ``min_draws``) gave 0.41-1.05,
#: and 0.84-1.19 at 100 draws, so calls of fewer than 1000 draws per row keep
#: the descent. GPU: none. On an H100 every hybrid lost to the descent where it
#: was timed: 1.93-2.83 times its time at a quarter to four draws per column
#: (``layout_*``), 2.30-2.79 at every depth for one row of 10**5 drawn 10**4 times
#: (``depth_*``; ``gpu-nvidia-h100-80gb-hbm3/tuning_quick.json``), and the table
#: alone takes over only from 2**18 draws (:data:`ALIAS_MIN_DRAWS`).
#:
#: ``band_deeper_below`` ``((rows, draws per column), ...)``: calls of at most
#: ``rows`` rows in a band, of at least the ``deep`` entry's ``min_n`` outcomes,
#: drawn fewer than this many times per column of the depth-1 table (its ``2**b1
#: >= ceil(n / K)`` columns), take the ``deep`` rule instead (depth 2 there).
#: For several rows: 6; at 8 to 16 rows of 4096 drawn half a time per column,
#: depth 1 took 1.08-1.14 of depth 2's time (the side-by-side run quoted above).
#: One row: 12. CPU: ``python -m benchmarks tuning --only band`` (rows
#: ``band_b1_n<n>_s<S>`` at n = 5000 to 10**5, in ``benchmarks/results/
#: cpu-2core-intel-xeon/band/``, each depth timed against depth 1). Since one
#: row's walk gathers its nodes as slices (:data:`BLOCK_GATHER_MAX_ROWS`, which
#: made depth 2's two levels cheaper and left depth 1's one level as it was),
#: depth 2 took 0.62-0.70 of depth 1's time at two to three draws per depth-1
#: column, 0.77-0.86 at five to six, 0.83-0.95 at eight to ten, 0.91-1.04 at
#: twelve, 0.97-1.06 at sixteen and 1.05-1.06 at twenty (two runs) (issue 11's C4 at n = 10**4,
#: S = 10**4 has five). Before it, 6 for one row too: depth 2 took 0.92 at five,
#: 0.95-1.02 at six and 1.03-1.12 at eight. The same grid on a 2-core AMD EPYC
#: (``benchmarks/results/cpu-2core-amd-epyc/band/``) puts the crossing at the
#: same place: 0.66-0.74 at two to three, 0.75-0.90 at five to eight, 0.94-0.97
#: at ten to twelve, 1.01-1.02 at sixteen and 1.06 at twenty.
HYBRID = {
    "cpu": {
        "min_n": 1000,
        "bands": ((1, 0.25, 4.0), (1 << 31, 0.5, 4.0)),
        "deep": ((32, 4096, 1000, 2.0),),
        "band_deeper_below": ((1, 12.0), (1 << 31, 6.0)),
    },
    "gpu": {"min_n": 1000, "bands": (), "deep": ()},
}


def layout(n: int, num_draws: int, platform: str | None = None, num_rows: int = 1) -> str:
    """``"descent"``, ``"hybrid"`` or ``"alias"``: how :func:`jaxdp._descent.sample`
    draws ``num_draws`` per row of ``n``, ``num_rows`` rows (static sizes only).

    All three are sound and :func:`jaxdp._descent.guarantee` states the largest of
    their bounds, so this choice never changes it. The hybrid needs at least two
    blocks (``n > K``) and a full table within :data:`jaxdp._alias.MAX_LOG2_COLUMNS`.
    """
    if hybrid_depth(n, num_draws, platform, num_rows):
        return "hybrid"
    return "alias" if use_alias(n, num_draws, platform, num_rows) else "descent"


def hybrid_depth(n: int, num_draws: int, platform: str | None = None, num_rows: int = 1) -> int:
    """Levels of the descent the hybrid walks below its alias table (0: no hybrid).

    Depth 1 (a table over the leaves' blocks) in :data:`HYBRID`'s ``bands``
    (for rows drawn fewer than ``band_deeper_below`` times per column of that
    table, the ``deep`` rule's depth where it gives one). Else, for calls the
    full table does not take, the ``deep`` entries ``(rows, min_n,
    min_draws, c)``: the smallest depth ``j >= 2`` below the top whose level's
    table (``2**b_j`` columns) gets at least ``c`` draws per column, for rows of
    at least ``min_n`` outcomes drawn at least ``min_draws`` times. Every depth
    needs the full table within :data:`jaxdp._alias.MAX_LOG2_COLUMNS`
    (:func:`jaxdp._descent.guarantee` bounds each depth there) and two blocks
    (``n > 8``).
    """
    k = kind(platform)
    b = _alias.log2_columns(n)
    if b > _alias.MAX_LOG2_COLUMNS or n <= 8:
        return 0
    h = HYBRID[k]
    lo, hi = next(((lo, hi) for rows, lo, hi in h["bands"] if num_rows <= rows), (0.0, 0.0))
    from ._descent import level_counts  # at call time: _descent imports this module

    counts = level_counts(n)
    deep = next((d[1:] for d in h.get("deep", ()) if num_rows <= d[0]), None)

    def deeper() -> int:  # the deep rule's depth, 0 where it does not apply
        if deep is None or n < deep[0] or num_draws < deep[1]:
            return 0
        for j in range(2, len(counts) - 1):
            if num_draws >= deep[2] * 2 ** _alias.log2_columns(counts[j]):
                return j
        return 0

    if n >= h["min_n"] and lo * 2**b <= num_draws < hi * 2**b:
        below = next((v for rows, v in h.get("band_deeper_below", ()) if num_rows <= rows), 0.0)
        few = num_draws < below * 2 ** _alias.log2_columns(counts[1])
        return (few and deeper()) or 1
    if use_alias(n, num_draws, platform, num_rows):
        return 0
    return deeper()


#: Large batches of rows of a multiple of ``K`` outcomes sum their leaves'
#: blocks as ``K`` strided slices added in order, rather than by one strided
#: ``reduce_window`` (:func:`jaxdp._descent._leaf_block_sums`; the same sums up
#: to the order of each block's ``K`` additions, both within the ``(K - 1) u`` the
#: guarantee counts): from ``min_entries`` scores in the call (rows times
#: outcomes) and ``min_n`` outcomes a row. The slices are one elementwise fusion
#: with the weights' exponentials, which XLA:CPU vectorises and splits over the
#: blocks. CPU: ``python -m benchmarks tuning --only block_sums`` (rows
#: ``block_sums_b<B>_n<n>_s<S>_<dtype>`` in ``benchmarks/results/
#: cpu-2core-intel-xeon/block-sums/``, the two timed against each other under the
#: default layout rule, float32 and int32 scores, 1 to 200,000 rows of 48 to
#: 2**24 outcomes): at 2**23 scores and more, from 128 outcomes a row, the slices
#: took 0.53-1.20 of the ``reduce_window``'s time (median 0.71, below 1 on 27 of
#: the 30 shapes and dtypes; the 1.20, 10**4 float32 rows of 1000, is W2's
#: shape, whose suite row took about half the time of the commit before in
#: three quick runs); on smaller calls they ranged from 0.83 to 1.32 (median
#: 0.97; one row of 10**4 to 10**6: 0.94-1.23),
#: and on rows of 48 and 104 outcomes 1.50-3.05 at any size. A partial last
#: block keeps the ``reduce_window`` (a pad, or a separate last block, inside
#: the fusion was slower, up to three times, on the shapes tried).
#: GPU (one H100, 2026-11-27: the same section, ``benchmarks/results/
#: gpu-nvidia-h100-80gb-hbm3/b9499d8/``): the slices took 0.34-0.35 of the
#: ``reduce_window``'s time on 10**4 rows of 10**5 (4.0 ms against 11.6; W2 went
#: from 8.4e10 to 2.5e11 candidates/s), 0.71-0.76 on 10**4 rows of 1000,
#: 0.74-0.85 on 256 rows of 32768 and 65536 rows of 128, float32 and int32; below
#: 2**23 scores (one row of 10**5 and 2**20, 64 of 4096, 1024 of 1000, 10**4 of
#: 104) 0.94-1.20, calls of 0.2-0.7 ms that launches bound: the CPU's bounds
#: serve. Under ``vmap`` the rows counted are the batch's: on the CPU a ``vmap``
#: over 1024 rows of 10**4, 10**4 of 1000 and 256 of 32768 took 0.53-0.57 of its
#: time with the ``reduce_window`` (rows ``block_sums_vmap_*`` of the CPU's
#: ``block-sums/`` file). Read at trace time, not staged
#: (:func:`staged`): a program lowered for the other kind gets the same sums,
#: only not that kind's choice of formulation.
#:
#: ``descent`` (CPU): a second, lower bound for calls the descent takes (not the
#: hybrids), at least ``min_rows`` rows of ``min_n`` outcomes and ``min_entries``
#: scores in all. Against the product with ones that such calls take otherwise
#: (:data:`DOT_BLOCK_SUMS`; ``python -m benchmarks tuning --only
#: dot_block_sums``, ``benchmarks/results/cpu-2core-amd-epyc/dot-block-sums/``,
#: one draw per row): 4 to 400 rows of 1024 to 10**5 outcomes from 2**16 scores
#: took 0.82-0.92 with the slices (``strided_vs_dot_rows.json``; 0.88-0.91 at 64
#: rows of 4096 and 100 of 10**4 in ``tuning_full.json``), 0.99-1.0 below 2**16;
#: rows of 1000 (1.03 at 1000 rows, 0.98 at 100) and one row (1.01-1.02 at 10**5
#: and 10**6) do not gain, and the hybrids lose (1.19-1.57).
STRIDED_BLOCK_SUMS = {
    "cpu": {
        "min_entries": 1 << 23,
        "min_n": 128,
        "descent": {"min_entries": 1 << 16, "min_n": 1024, "min_rows": 4},
    },
    "gpu": {"min_entries": 1 << 23, "min_n": 128},
}


#: Whether the leaves' block sums that :data:`STRIDED_BLOCK_SUMS` does not take
#: are a product of the full blocks with a vector of ones
#: (:func:`jaxdp._descent._dot_block_sums`, float32 accumulation) rather than one
#: strided ``reduce_window``: ``K`` non-negative terms added in some order either
#: way, within the same bound, so the law and its guarantee do not depend on it
#: (a draw whose uniform falls within the last bits of a block's sum may). CPU:
#: ``python -m benchmarks tuning --only dot_block_sums`` (rows
#: ``dot_block_sums_*`` in ``benchmarks/results/cpu-2core-amd-epyc/dot-block-sums/``,
#: ``exponential`` with the product against the ``reduce_window``, under the
#: default layout rule): 0.78-0.86 of the ``reduce_window``'s time at one draw per
#: row below the strided rule (100 to 10**4 rows of 100 to 10**4, one row of 10**5
#: and 10**6, partial last blocks), 0.85-0.96 for the hybrids (issue 11's C4 at
#: n = 10**4 and 10**5: 0.96 and 0.93; 0.92-0.94 in side-by-side runs of 300
#: rounds), 0.97-0.99 where the strided slices take the call or the table does.
#: XLA:CPU hands the ``reduce_window`` to a YNNPACK fusion (77 us of C4's call at
#: n = 10**5). Against the product, the strided slices took 0.46 at 10**4 rows of
#: 1000 (their rule's sizes), 0.88-0.91 at 64 rows of 4096 and 100 of 10**4,
#: 0.98-1.03 at the other single draws, and 1.19-1.57 in the hybrids; at 4 to
#: 400 rows of 1024 to 10**5 outcomes from 2**16 scores, one draw each, 0.82-0.92,
#: which :data:`STRIDED_BLOCK_SUMS`'s ``descent`` bound now takes. GPU: False (the
#: ``reduce_window``, as in every GPU run so far) until measured there
#: (``benchmarks/device_check.sh`` runs the section).
DOT_BLOCK_SUMS = {"cpu": True, "gpu": False}

#: One row of fewer outcomes than this, with a partial last block, takes the
#: ``reduce_window`` even where :data:`DOT_BLOCK_SUMS` holds: the product adds
#: its partial block lane by lane, a second branch beside the product, which
#: XLA:CPU's thunk executor runs concurrently, and on a 2-core VM the other
#: thread's wake-up cost more than the sums. CPU (2-core AMD EPYC, 2026-11-28,
#: ``benchmarks/results/cpu-2core-amd-epyc/layout-one-row/dot_partial.txt``, the
#: ``reduce_window`` against the product, 300 alternated rounds): 0.41-0.59 at
#: n = 20, 50, 100, 500 and 1003 drawn 64 or 120 times, 1.00-1.03 drawn once and
#: at n = 10; before, the same pair took 1.28 at 10**4 + 3 (the hybrid) and
#: 1.5-1.7 at 10**5 + 3 and 10**6 + 3, which keep the product. GPU: no effect
#: (:data:`DOT_BLOCK_SUMS` is off there).
DOT_PARTIAL_ONE_ROW_MIN_N = {"cpu": 1024, "gpu": 0}


def strided_block_sums(
    num_rows: int, n: int, platform: str | None = None, descent: bool = False
) -> bool:
    """Whether ``num_rows`` rows of ``n`` outcomes sum their leaves' blocks by strided
    slices (:data:`STRIDED_BLOCK_SUMS`; ``descent``: the call takes the descent,
    whose own lower bound applies too)."""
    from ._descent import K  # at call time: _descent imports this module

    rule = STRIDED_BLOCK_SUMS[kind(platform)]
    if rule is None or n % K:
        return False
    if n >= rule["min_n"] and num_rows * n >= rule["min_entries"]:
        return True
    low = rule.get("descent") if descent else None
    return bool(low) and (
        n >= low["min_n"] and num_rows >= low["min_rows"] and num_rows * n >= low["min_entries"]
    )


def block_sums_by(num_rows: int, n: int, platform: str | None = None, descent: bool = False) -> str:
    """How the leaves' block sums of ``num_rows`` rows of ``n`` are taken:
    ``"strided"`` (:func:`strided_block_sums`), else ``"dot"`` where
    :data:`DOT_BLOCK_SUMS` says so, else ``"reduce_window"``."""
    from ._descent import K  # at call time: _descent imports this module

    if strided_block_sums(num_rows, n, platform, descent):
        return "strided"
    k = kind(platform)
    if not DOT_BLOCK_SUMS[k]:
        return "reduce_window"
    if num_rows == 1 and n % K and n < DOT_PARTIAL_ONE_ROW_MIN_N[k]:  # a partial last block
        return "reduce_window"
    return "dot"


#: Whether the row maximum of integer scores is taken as the elementwise maximum
#: of 8 strided slices, then a maximum over the row (:func:`jaxdp._logits.row_max`),
#: rather than by one ``jnp.max``: the same value. XLA:CPU hands a float
#: maximum to a YNNPACK fusion but emits an integer one as a ``reduce_window``
#: loop. CPU: ``python -m benchmarks tuning --only int_max`` (rows
#: ``int_max_b<B>_n<n>`` in ``benchmarks/results/cpu-2core-intel-xeon/int-max/``,
#: ``exponential`` on int32 scores, one draw per row, the two timed against each
#: other, 1 to 10**5 rows of 10 to 10**6 outcomes): 0.77-1.03 of ``jnp.max``'s
#: time (0.97 at 256 rows of 32768, issue 11's C1, in that run). GPU (one H100,
#: 2026-11-27, ``.../gpu-nvidia-h100-80gb-hbm3/b9499d8/strided-rule/``):
#: 1.02-1.05 at 256 rows of 32768, 10**4 of 1000 and one of 10**6, so
#: ``jnp.max`` there.
STRIDED_INT_ROW_MAX = {"cpu": True, "gpu": False}


def strided_int_row_max(platform: str | None = None) -> bool:
    """:data:`STRIDED_INT_ROW_MAX` for ``platform`` (default: the default backend, at
    trace time; the value is the same either way, so this is not staged)."""
    return STRIDED_INT_ROW_MAX[kind(platform)]


#: Calls of fewer rows than this walk the draws of the descent (or of the hybrid)
#: flat, ``(draws * rows, 1)``, rather than ``(draws, rows)``
#: (:func:`jaxdp._descent.descend`; the same uniforms, so the same draws): the
#: hybrid at any number of rows. With a short minor axis of rows XLA:CPU emits
#: each level's choice as a loop over the rows per draw. CPU: ``python -m
#: benchmarks tuning --only rows`` (rows ``rows_b<B>_n<n>_s<S>``, the two walks
#: interleaved under the default layout rule, in ``benchmarks/results/
#: cpu-2core-intel-xeon/rows/``): flat/by-rows time 0.46-0.73 for the descent of
#: 2 to 12 rows, 1.01-1.14 for 16 to 256; 0.29-0.69 for the hybrid from 2 to 64
#: rows (1.00 for a deep hybrid of 32 rows). GPU: not measured; the CPU's values
#: (the walk's shape is the only difference).
FLAT_BELOW_ROWS = {
    "cpu": {"descent": 16, "hybrid": 1 << 31},
    "gpu": {"descent": 16, "hybrid": 1 << 31},
}

#: Calls of at most this many rows gather each node's ``K`` entries in the
#: descent's walk (the leaves' scores, the block sums above them) as one ``K``-wide
#: slice of the table seen as ``(R * W / K, K)`` (:func:`jaxdp._alias.take_blocks`)
#: rather than by ``K`` scalar indices, where the level's width ``W`` is a multiple
#: of ``K``: the same values, so the same draws. CPU: one row, which is also what a
#: ``vmap`` over rows or over ε traces. Timed against the scalar gather in one
#: process, calls alternated (2-core Intel Xeon): 10**4 draws of one row took 0.75-0.79
#: of the time at n = 10**4 (the suite's C4 row; the scalar gather's copy out of the
#: walk's level switch is gone), 0.82-0.86 at 10**5 and 0.90 at 10**6; a ``vmap`` over
#: 12 rows of 10**3 (1,024 draws each), 64 of 10**4 and 8 of 10**5 took 0.88, 0.92
#: and 0.93; other shapes 0.95-1.01. With 12 rows in one call (``shape=(1024, 12)``)
#: XLA:CPU fused the slices' gather with the leaf choice and the threefry into one
#: unvectorised loop, 2.9 times slower, so several rows keep the scalar gather. On
#: a 2-core AMD EPYC (``python -m benchmarks tuning --only block_gather``, rows
#: ``block_gather_b<B>_n<n>_s<S>``, three runs in ``benchmarks/results/
#: cpu-2core-amd-epyc/block-gather/``): one row drawn 10**4 times took 0.79-0.86 at
#: n = 10**4, 0.79-0.82 at 10**5 and 0.91-0.94 at 10**6; 0.90-1.13 at 4096 and
#: 10**4 drawn 2000 to 4096 times; 12 rows of 10**4 (1,024 draws each) 0.83-0.86
#: there and 2 rows 0.98-1.16, so the rule stays at the one row that gains on both
#: machines. GPU: the CPU's value (unmeasured; a slice is ``K`` contiguous floats).
BLOCK_GATHER_MAX_ROWS = {"cpu": 1, "gpu": 1}


#: One row's alias table of at most ``2**this`` columns is read by a chain of
#: selects over its columns (:func:`jaxdp._alias._select_columns`) rather than by
#: two gathers: the same values, so the same draws. XLA:CPU splits a gather from
#: the elementwise work around it, so the gathered draw is two loops that each
#: hash the draw's counter again; the selects keep the draw one vectorised loop,
#: at ``2 N`` selects a draw. Several rows keep the gather (each draw would read
#: every row's columns); a ``vmap`` over rows traces one row. CPU: ``python -m
#: benchmarks tuning --only alias_select`` (rows ``alias_select_*``, two runs in
#: ``benchmarks/results/cpu-2core-amd-epyc/alias-select/``, ``exponential`` drawing
#: from one row, the two lookups timed against each other): tables of 4 to 32
#: columns drawn 10**4 times took 0.74-0.95 of the gather's time (issue 11's C4 at
#: n = 10: 0.82-0.95), 10**6 times 0.44-0.81; 10**3 times 0.53-1.11 (calls of
#: 0.1 ms); a ``vmap`` over 64 to 10**4 rows drawn 8 to 10**4 times each
#: 0.68-1.02. At 64 columns: 0.82-1.08, so the rule stops at 32. GPU: off (-1:
#: the gather, as in every GPU run so far) until measured there
#: (``benchmarks/device_check.sh`` runs the section): a GPU's gathers from a
#: cached table of at most 32 columns are cheap, and under a ``vmap`` over tables
#: the selects read every column of the draw's table from memory. The two
#: lookups read the same values, so the draws do not depend on this choice.
ALIAS_SELECT_MAX_LOG2 = {"cpu": 5, "gpu": -1}

#: The alias table's exact prefix sums (:func:`jaxdp._alias.prefix_sums`) sum
#: blocks of this many entries by an integer product with a triangular matrix of
#: ones, then the blocks' totals the same way; 0: one ``cumsum``. Integer sums,
#: so the tables and the draws do not depend on it. CPU: XLA:CPU runs a
#: ``cumsum`` as a ``reduce_window`` at 5-20 ns an entry (4 x 1024 limbs: 77-104
#: us alone, the products 25-50). ``python -m benchmarks tuning --only
#: prefix_sums`` (rows ``prefix_sums_*`` in ``benchmarks/results/
#: cpu-2core-amd-epyc/prefix-sums/``, ``exponential`` with the products against
#: the ``cumsum``; two runs, ``tuning_full.json`` and ``tuning_full_run2.json``):
#: 0.87 and 0.94 at one row of 1000 drawn 10**4 times (issue 11's C4; 0.89-0.92
#: in four more side-by-side runs of 300 rounds), 0.93 at the tables of 2**17
#: columns, 0.93-1.02 under a ``vmap`` over 64 and 256 rows, 0.98-1.02 elsewhere
#: (tables of 128 to 2**14 columns, the hybrids). Blocks of 16 beat 8,
#: 32, 64 and 128 on the sums alone (42 against 45-96 us at 1024 entries, 0.72
#: against 0.74-2.8 ms at 2**17): a product costs ``k`` multiply-adds an entry.
#: GPU: 0 (XLA:GPU rewrites a long ``reduce_window`` scan into a tree, and an
#: integer matrix product is no library call there), until measured there
#: (``benchmarks/device_check.sh`` runs the section).
PREFIX_SUM_BLOCK = {"cpu": 16, "gpu": 0}

# ----------------------------------------------------------------------------- tabulated noisy max

#: Largest row tabulated for exponential and Laplace noise: the table costs ``n**2 / 2``
#: double-float factors per row, which no draw count repays beyond this on CPU.
#: ``SECURITY.md`` ("tabulated noisy max") and the noisy-max docstrings quote the
#: guarantee for rows up to this size. GPU: the CPU value.
TABLE_MAX_CANDIDATES = {"cpu": 4096, "gpu": 4096}

#: Cost of building the permute-and-flip table, per ``n**2`` and row, in units of
#: one race variate: the table's double-float factors against the race's one
#: 64-bit exponential variate per candidate and draw. CPU: ``python -m benchmarks
#: tuning --only costs`` (rows ``race_variate_ns`` and ``table_cost_n*``: 2.01 and
#: 2.13 in ``benchmarks/results/cpu-2core-amd-epyc/costs-k8/``), rounded up, so
#: that a near tie goes to the race (which needs no table). GPU: the CPU value.
#: On an H100 the same rows gave 15.1 and 14.0 at n = 512 (launch-bound) and 1.24
#: and 1.51 at n = 2048 (``gpu-nvidia-h100-80gb-hbm3/tuning_quick.json`` and
#: ``a86c851/costs/``), where permute-and-flip's table took 1.06 times the
#: exponential mechanism's time (C6, same folder), so the CPU's value stays.
TABLE_COST = {"cpu": 2.5, "gpu": 2.5}

#: Cost of one draw of the descent (:func:`jaxdp._descent.sample`), in race
#: variates (``python -m benchmarks tuning --only costs``, row
#: ``descent_draw_cost``: 30.1 with nodes of 8 in ``costs-k8/``, rounded up; was
#: 40 with nodes of 16). GPU: the CPU value. On an H100 the same row gave 45 and
#: 20.9 in two leases (a variate 0.022-0.023 ns;
#: ``gpu-nvidia-h100-80gb-hbm3/tuning_quick.json`` and ``a86c851/costs/``), and the
#: hybrid's draws were too cheap against the calls' launch overhead to measure
#: (negative differences), so for the permute-and-flip table the GPU's cost
#: model is still the CPU's (and its rule the same on both kinds).
KERNEL_DRAW_COST = {"cpu": 35.0, "gpu": 35.0}

#: The same for a draw from the alias table (:mod:`jaxdp._alias`), where the
#: categorical kernel uses one (same command, row ``alias_draw_cost``: 1.58 since
#: a draw takes one threefry block, rounded up; was 2.5 with two). GPU: the CPU
#: value (an H100 gave 3.4 in ``a86c851/costs/``, launch-bound, and a negative
#: difference in the lease before).
ALIAS_DRAW_COST = {"cpu": 2.0, "gpu": 2.0}

#: The same for a draw of the hybrid layout (an alias-table draw over the blocks,
#: then one level of the descent): same command, row ``hybrid_draw_cost`` (14.0
#: in ``costs-hybrid/``, 12.9 in a quick run; rounded up; the same run has the
#: descent at 31 and the table at 1.19). A hybrid of depth ``j`` is priced ``j``
#: of these (unmeasured; it is taken only from 4096 candidates, the largest the
#: table tabulates). GPU: the CPU value (unmeasured).
HYBRID_DRAW_COST = {"cpu": 15.0, "gpu": 15.0}

#: Laplace noise on the table path: the draws below the row's top score
#: (probability at most 1/2, whatever the scores) finish with a conditioned race
#: (:func:`jaxdp._tabulated.conditional_race`). Priced at that worst case, per
#: draw and candidate, in race variates: 1/2 times the conditioned variate's
#: cost, so that a row with an isolated top is priced as it runs. CPU: ``python
#: -m benchmarks tuning --only costs`` (row ``conditioned_variate_cost``: 0.88
#: race variates, compaction included, committed in
#: ``benchmarks/results/cpu-2core-intel-xeon/costs/``; 0.94 and 1.03 before its
#: constants were hoisted out of the loop), rounded up to 1.2, so 0.6.
#: GPU: 2.4. On an H100 the same row gave 4.75 (``costs/tuning_quick.json`` in
#: ``benchmarks/results/gpu-nvidia-h100-80gb-hbm3/a86c851/``), and the suite's C6
#: rows agree: at ``n = 10**3``, ``S = 10**5`` the table took 0.98 of the race's
#: time on the suite's row and 2.4 times it on the two rows whose draws mostly
#: fall below the top score (``results_quick.json``, same folder). At 2.4 per
#: candidate a draw below the top costs more than a race draw, so on a GPU the
#: rule draws Laplace noise by the race at every size (the launch-bound sizes
#: measured there; larger S is unmeasured).
LAPLACE_BELOW_COST = {"cpu": 0.6, "gpu": 2.4}

_DRAW_COST = {"descent": KERNEL_DRAW_COST, "alias": ALIAS_DRAW_COST, "hybrid": HYBRID_DRAW_COST}


def use_table(noise: str, draws_per_row: int, n: int, platform: str | None = None) -> bool:
    """Whether the noisy max of ``noise`` is drawn by tabulating its law once per row
    (:func:`jaxdp._tabulated.draw`) rather than by the race, for these static sizes:
    when the cost model says the table is cheaper. The race costs ``n`` variates a
    draw; the table ``TABLE_COST n**2`` a row plus a kernel draw per draw, and for
    Laplace noise two alias draws and :data:`LAPLACE_BELOW_COST` ``n`` per draw (on a
    GPU more than the race's ``n``, so Laplace is never tabulated there). Gumbel
    noise is never tabulated: ``report_noisy_max`` draws it with the exponential
    mechanism's kernels (:func:`choose_method`). Both paths are sound; each
    docstring states both guarantees."""
    k = kind(platform)
    race = draws_per_row * n
    # Priced with the CPU's layout on every kind, so that this rule gives the same
    # answer on both and needs no staging (the GPU's draw costs are the CPU's too).
    how = layout(n, draws_per_row, "cpu")
    # A hybrid of depth j walks j levels below its table: j hybrid draws' worth.
    per_draw = _DRAW_COST[how][k] * max(1, hybrid_depth(n, draws_per_row, "cpu"))
    table = TABLE_COST[k] * n * n + per_draw * draws_per_row
    if noise == "laplace":  # plus the first stage (a uniform and an alias draw a
        # draw, for one row) and the conditioned race, priced at its worst case
        table += (2 * ALIAS_DRAW_COST[k] + LAPLACE_BELOW_COST[k] * n) * draws_per_row
    elif noise != "exponential":
        return False
    return n <= TABLE_MAX_CANDIDATES[k] and draws_per_row > 1 and race >= table


# ----------------------------------------------------------------------------- exponential "auto"

#: ``method="auto"`` draws by Gumbel-max (the race) when a call has one draw per
#: row over at most this many candidates, else by the inverse CDF (the sound
#: descent or the alias table). Trades the race's ``n`` noise values per draw
#: against the inverse CDF's fixed work per row (weights, block sums, at least
#: one level of the descent, two from 17 candidates on). CPU: ``python -m
#: benchmarks crossover`` (committed: ``benchmarks/results/<machine>/
#: crossover_full.json``): with one draw per row the race is faster up to 32
#: candidates, ties at 48 and is slower from 64; with more draws per row the
#: inverse CDF wins or ties nearly everywhere. GPU: the CPU value. On an H100
#: (``crossover_quick.json`` in ``gpu-nvidia-h100-80gb-hbm3/``) the race won from
#: 32 candidates with one draw per row (0.62-0.90 of the inverse CDF's time at 32
#: and 256) and lost at 2 and 8 (1.16-1.51); with 64 draws per row it took 0.28-0.37
#: of the time up to 256 candidates on one row, and up to 32 on 1024 rows.
#: The Gumbel region is kept small on purpose: the race's δ' is ``n (1 + e**ε')
#: 2**-65``, which grows with ``n e**ε``, while the inverse CDF's does not depend
#: on ε; a rule that picked the race for large ``n`` would make ``"auto"``'s
#: guarantee depend on ε there (ε is traced, so the rule cannot look at it).
GUMBEL_MAX_CANDIDATES = {"cpu": 32, "gpu": 32}


def choose_method(
    num_draws_per_row: int, n: int, num_rows: int, platform: str | None = None
) -> str:
    """The faster of ``"gumbel"`` and ``"inverse_cdf"`` for these static sizes.

    Gumbel-max costs ``S * n`` noise variates (64 random bits and a log each) per
    row; the inverse CDF costs ``n`` weights per row, then per draw a walk down
    the descent's levels or one alias-table lookup. With one draw per row the
    race wins only over few candidates (:data:`GUMBEL_MAX_CANDIDATES`); with
    more draws the inverse CDF wins or ties. ``num_rows`` does not move the
    crossover. Static (shapes and platform only), so a call compiles one kernel;
    both kernels are sound.
    """
    del num_rows
    if num_draws_per_row == 1 and n <= GUMBEL_MAX_CANDIDATES[kind(platform)]:
        return "gumbel"
    return "inverse_cdf"


# ----------------------------------------------------------------------------- private selection

#: Runs of ``candidate_fn`` per step of :func:`jaxdp.select_private_candidate`'s
#: ``while_loop`` (one ``vmap`` over a block of keys). Trades wasted runs (up to
#: ``BLOCK - 1`` beyond the drawn count, masked out: they cost time, not privacy)
#: and the memory of ``BLOCK`` runs at once against the loop's per-step cost.
#: CPU: 16 (``python -m benchmarks study private-selection``). GPU (unmeasured):
#: 16 as well: a run may be a whole training job, and with the truncation's
#: expected counts (``1 / stop_probability``, hundreds to thousands) 16 runs a step
#: is tens of steps, not thousands. The block also fixes which key each run gets,
#: so keeping one value keeps the draws the same on every backend.
SELECTION_BLOCK = {"cpu": 16, "gpu": 16}


def selection_block(max_repetitions: int, platform: str | None = None) -> int:
    """Runs per step of :func:`jaxdp.select_private_candidate` (at most the cap)."""
    return min(SELECTION_BLOCK[kind(platform)], max_repetitions)
