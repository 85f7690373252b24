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

    @property
    def median_s(self) -> float:
        return statistics.median(self.times)

    @property
    def min_s(self) -> float:
        return min(self.times)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
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
