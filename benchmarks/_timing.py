"""Timing done right: compile time apart, warm-up, block_until_ready, median of
repeats, one compiled executable reused across repeats, peak memory per kernel."""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import jax


@dataclass
class Measurement:
    """Wall-clock times of one benchmark (seconds) and its memory."""

    times: list[float]
    compile_s: float | None = None
    peak_bytes: int | None = None
    memory_note: str = ""
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # merged into the result entry

    @property
    def median_s(self) -> float:
        return statistics.median(self.times)

    @property
    def min_s(self) -> float:
        return min(self.times)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("extra"))
        d["median_s"] = self.median_s
        d["min_s"] = self.min_s
        return d


def _repeat(call: Callable[[], Any], repeats: int, budget_s: float) -> list[float]:
    """Times ``call`` up to ``repeats`` times, fewer once ``budget_s`` is spent."""
    times: list[float] = []
    spent = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if spent > budget_s and len(times) >= 1:
            break
    return times


def time_jax(
    fn: Callable[..., Any], args: Sequence[Any], *, repeats: int, budget_s: float
) -> Measurement:
    """Compiles ``jax.jit(fn)`` once (timed apart), warms up, then times repeats.

    Peak memory is what XLA's buffer assignment reserves for the compiled
    program beyond its inputs: temporaries plus outputs
    (``compiled.memory_analysis()``), the exact figure on every backend.
    """
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    peak = None
    note = "XLA temp + output buffers"
    try:
        stats = compiled.memory_analysis()
        peak = int(stats.temp_size_in_bytes + stats.output_size_in_bytes)
    except (AttributeError, NotImplementedError, RuntimeError):  # pragma: no cover
        note = "memory_analysis unavailable"
    jax.block_until_ready(compiled(*args))  # warm-up, outside the timer

    def call() -> None:
        jax.block_until_ready(compiled(*args))

    times = _repeat(call, repeats, budget_s)
    return Measurement(times=times, compile_s=compile_s, peak_bytes=peak, memory_note=note)


def time_python(
    fn: Callable[[], Any], *, repeats: int, budget_s: float, memory: bool = True
) -> Measurement:
    """Times a plain-Python/NumPy callable; peak memory by ``tracemalloc``.

    One warm-up call, the timed repeats, then one more call under
    ``tracemalloc`` (which slows Python code, so it is never timed) for the
    peak of the memory allocated during a call.
    """
    fn()
    gc.collect()
    times = _repeat(fn, repeats, budget_s)
    peak = None
    note = ""
    if memory:
        gc.collect()
        tracemalloc.start()
        try:
            fn()
            peak = int(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        note = "tracemalloc peak of one call"
    return Measurement(times=times, peak_bytes=peak, memory_note=note)


def best_rate(work: float, fn: Callable[..., Any], args: Sequence[Any], repeats: int) -> float:
    """``work / fastest time`` of a jitted ``fn``: a peak rate for the floors."""
    m = time_jax(fn, args, repeats=repeats, budget_s=5.0)
    return work / m.min_s


# ----------------------------------------------------------------------------- pairs


def compiled_call(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Callable[[], Any], float]:
    """(a zero-argument call of the compiled ``jax.jit(fn)`` on ``args``, compile seconds)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    return (lambda: jax.block_until_ready(compiled(*args))), compile_s


def cold_compile(fn: Callable[..., Any], args: Sequence[Any]) -> Callable[[], Any]:
    """A call that traces, lowers and compiles ``jax.jit(fn)`` from empty caches.

    ``jax.clear_caches()`` first, so that neither the jit caches nor jaxdp's own
    jitted inner layers hold a compiled program: the time a user waits at the
    first call. ``args`` may be ``jax.ShapeDtypeStruct``: nothing runs.
    """

    def call() -> None:
        jax.clear_caches()
        jax.jit(fn).lower(*args).compile()

    return call


def time_interleaved(
    subject: Callable[[], Any],
    twin: Callable[[], Any],
    *,
    repeats: int,
    budget_s: float,
    warm_up: bool = True,
    min_time_s: float = 0.0,
    max_rounds: int = 1000,
) -> tuple[list[float], list[float], list[float]]:
    """Times two zero-argument calls alternately, in ABBA order, after one warm-up each
    (unless ``warm_up`` is False: calls that compile from cold every time).

    Runs at least ``repeats`` rounds, and more (up to ``max_rounds``) until
    ``min_time_s`` is spent: a call of a few hundred microseconds is timed
    hundreds of times, not three (whose median swung by 2x on the shared 2-core
    machine). Stops once ``budget_s`` is spent after two rounds.

    Returns (subject times, twin times, per-round ratios subject / twin). On a
    shared machine the load drifts; alternating the two inside every round puts
    both under the same load, so the median of the per-round ratios is steadier
    than the ratio of two medians taken one after the other.
    """
    if warm_up:
        subject()
        twin()
    ts: list[float] = []
    tt: list[float] = []
    spent = 0.0
    i = 0
    while i < max(1, repeats) or (spent < min_time_s and i < max_rounds):
        order = ((subject, ts), (twin, tt)) if i % 2 == 0 else ((twin, tt), (subject, ts))
        for call, out in order:
            t0 = time.perf_counter()
            call()
            dt = time.perf_counter() - t0
            out.append(dt)
            spent += dt
        if spent > budget_s and i >= 1:
            break
        i += 1
    return ts, tt, [a / b for a, b in zip(ts, tt, strict=True)]
