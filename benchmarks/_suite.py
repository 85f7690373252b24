"""``python -m benchmarks``: W1-W4 against every peer, floors, targets, reports."""

from __future__ import annotations

import argparse
import datetime
import inspect
import math
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp
from jaxdp import _kernels

from . import _baselines, _floors, _machine, _paths, _report, _shapes
from ._timing import Measurement, time_jax, time_python

EPS, DELTA = 1.0, 1.0


def fmt(x: int) -> str:
    """1000 -> '1e3', 200000 -> '2e5', 10 -> '1e1'."""
    e = int(math.floor(math.log10(x))) if x > 0 else 0
    m = x / 10**e
    return f"{m:g}e{e}"


@dataclass
class Case:
    """One benchmark: what runs, on which workload, sampling which law."""

    name: str
    workload: str  # W1 .. W4
    impl: str  # human-readable
    library: str  # jaxdp / jax / numpy / python / diffprivlib / opendp
    law: str  # "em" (exponential mechanism), "noise" (noise-based), "continuous"
    n: int
    draws_per_row: int
    rows: int
    run: Callable[[jax.Device | None], Measurement]
    on_device: bool  # True: JAX code, run once per backend
    draws_per_call: int | None = None  # when extrapolated from a short run
    logs_per_noise: int = 1
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_draws(self) -> int:
        return self.draws_per_row * self.rows


# ----------------------------------------------------------------------------- sizes

MODES: dict[str, dict[str, Any]] = {
    "smoke": {
        "w1": [(1000, 10**4)],
        "w1_sweep": [],
        "w1_noise": [(100, 100)],
        "w2": [(100, 200)],
        "w4": [],
        "loop_draws": 20,
        "lib_draws": 5,
        "repeats": 1,
        "budget_s": 0.5,
        "prng": False,
        "floors": "smoke",
    },
    "quick": {
        "w1": [(1000, 10**6)],
        "w1_sweep": [(10, 10**6), (10**5, 10**6)],
        "w1_noise": [(1000, 10**4)],
        "w2": [(1000, 10**4)],
        "w4": [(1000, 10**5, 10**4)],
        "loop_draws": 300,
        "lib_draws": 40,
        "repeats": 3,
        "budget_s": 1.0,
        "prng": False,
        "floors": "quick",
    },
    "full": {
        "w1": [(1000, 10**6)],
        "w1_sweep": [
            (n, s)
            for n in (10, 1000, 10**5, 10**7)
            for s in (10**4, 10**6, 10**8)
            if (n, s) != (1000, 10**6)
        ],
        "w1_noise": [(10, 10**5), (1000, 10**4), (1000, 10**6), (10**5, 100), (10**7, 10)],
        "w2": [(1000, 10**4), (1000, 10**5), (10**5, 10**3), (10**5, 10**4)],
        "w4": [(1000, 10**5, 10**4), (10**5, 10**6, 10**5), (10**5, 10**6, 10**3)],
        "loop_draws": 3000,
        "lib_draws": 300,
        "repeats": 7,
        "budget_s": 8.0,
        "prng": True,
        "floors": "full",
    },
}

#: Largest number of noise values (or S x n temporaries) a baseline may hold at once.
MAX_TEMP_ELEMENTS = {"smoke": 10**6, "quick": 2 * 10**7, "full": 2 * 10**8}


# ----------------------------------------------------------------------------- case builders


def _scores(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Scores of a realistic spread: N(0, 3^2), so logits eps*s/2 have sd 1.5."""
    return (np.random.default_rng(seed).normal(size=shape) * 3.0).astype(np.float32)


def _jax_case(fn: Callable, arrays: Callable[[], tuple], repeats: int, budget: float):
    """A runner timing ``fn(*arrays())`` jitted on a device."""

    def run(device: jax.Device | None) -> Measurement:
        with jax.default_device(device):
            args = jax.device_put(arrays(), device)
            return time_jax(fn, args, repeats=repeats, budget_s=budget)

    return run


def _py_case(make: Callable[[], Callable[[], Any]], repeats: int, budget: float, memory=True):
    def run(device: jax.Device | None) -> Measurement:
        return time_python(make(), repeats=repeats, budget_s=budget, memory=memory)

    return run


def _key_arrays(scores: np.ndarray, impl: str | None = None) -> Callable[[], tuple]:
    return lambda: (jax.random.key(0, impl=impl), jnp.asarray(scores))


def w1_cases(n: int, s: int, mode: dict, mode_name: str, main: bool) -> list[Case]:
    """W1, exponential-mechanism law: one score vector, S draws."""
    scores = _scores((n,), seed=n)
    r, b = mode["repeats"], mode["budget_s"]
    tag = f"n{fmt(n)}_s{fmt(s)}"
    tags = ("w1", "w1_main") if main else ("w1",)
    chosen = _kernels.choose_method(s, n, 1)
    cases = [
        Case(
            f"exponential_auto_{tag}_f32",
            "W1",
            f"jaxdp.exponential(method='auto' -> {chosen})",
            "jaxdp",
            "em",
            n,
            s,
            1,
            _jax_case(
                lambda k, x: jaxdp.exponential(
                    k, x, epsilon=EPS, sensitivity=DELTA, shape=(s,), method="auto"
                ),
                _key_arrays(scores),
                r,
                b,
            ),
            True,
            tags=tags + ("jaxdp_em",),
            extra={"method": chosen},
        ),
        Case(
            f"hand_jax_inverse_cdf_{tag}_f32",
            "W1",
            "hand-written JAX: logsumexp + cumsum + searchsorted",
            "jax",
            "em",
            n,
            s,
            1,
            _jax_case(
                lambda k, x: _baselines.hand_inverse_cdf(k, x, draws=s), _key_arrays(scores), r, b
            ),
            True,
            tags=tags + ("hand",),
        ),
        Case(
            f"numpy_choice_{tag}_f64",
            "W1",
            "numpy Generator.choice(n, size=S, p=p)",
            "numpy",
            "em",
            n,
            s,
            1,
            _py_case(lambda: _baselines.numpy_choice(scores, EPS, DELTA, s), r, b),
            False,
            tags=tags + ("choice",),
        ),
    ]
    if main or (mode_name == "full" and n <= 10**5 and s == 10**6):
        k = mode["loop_draws"]
        cases.append(
            Case(
                f"textbook_loop_{tag}_f64",
                "W1",
                f"per-draw np.random.choice(n, 1, p=p) loop (extrapolated from {k} draws)",
                "python",
                "em",
                n,
                s,
                1,
                _py_case(lambda: _baselines.textbook_loop(scores, EPS, DELTA, k), 2, b),
                False,
                draws_per_call=k,
                tags=tags + ("textbook",),
            )
        )
        libs, notes = _baselines.dp_library_samplers(scores, EPS, DELTA, mode["lib_draws"])
        for lib, (fn, law) in libs.items():
            cases.append(
                Case(
                    f"{lib}_{tag}_f64",
                    "W1",
                    f"{lib.replace('_', '.', 1)}: one draw per call "
                    f"(extrapolated from {mode['lib_draws']} draws)",
                    lib.split("_")[0],
                    law,
                    n,
                    s,
                    1,
                    _py_case(lambda fn=fn: fn, 2, b),
                    False,
                    draws_per_call=mode["lib_draws"],
                    tags=tags + ("dplib",),
                )
            )
        for note in notes:
            NOTES.append(f"W1 {tag}: {note}")
    if n * min(s, 10**4) <= MAX_TEMP_ELEMENTS[mode_name]:
        sc = min(s, 10**4)
        cases.append(
            Case(
                f"jax_categorical_n{fmt(n)}_s{fmt(sc)}_f32",
                "W1",
                "jax.random.categorical (S x n Gumbel noise at once)",
                "jax",
                "em",
                n,
                sc,
                1,
                _jax_case(
                    lambda k, x: _baselines.jax_categorical(k, x, shape=(sc,)),
                    _key_arrays(scores),
                    r,
                    b,
                ),
                True,
                logs_per_noise=2,
                tags=tags + ("categorical",),
            )
        )
    return cases


def noise_cases(n: int, s: int, mode: dict, mode_name: str) -> list[Case]:
    """W1 shape, noise-based samplers (and exponential's Gumbel method); W3 Laplace."""
    scores = _scores((n,), seed=n + 1)
    r, b = mode["repeats"], mode["budget_s"]
    tag = f"n{fmt(n)}_s{fmt(s)}"
    common = {"epsilon": EPS, "sensitivity": DELTA, "shape": (s,)}

    def jx(name, impl, fn, law, logs, workload="W1", key_impl=None, extra_tags=()):
        return Case(
            name,
            workload,
            impl,
            "jaxdp",
            law,
            n,
            s,
            1,
            _jax_case(fn, _key_arrays(scores, key_impl), r, b),
            True,
            logs_per_noise=logs,
            tags=("noise", "jaxdp_noise") + extra_tags,
        )

    cases = [
        jx(
            f"exponential_gumbel_{tag}_f32",
            "jaxdp.exponential(method='gumbel')",
            lambda k, x: jaxdp.exponential(k, x, method="gumbel", **common),
            "em",
            2,
        ),
        jx(
            f"report_noisy_max_laplace_{tag}_f32",
            "jaxdp.report_noisy_max(noise='laplace')",
            lambda k, x: jaxdp.report_noisy_max(k, x, noise="laplace", **common),
            "noise",
            1,
            workload="W3",
            extra_tags=("w3",),
        ),
        jx(
            f"permute_and_flip_{tag}_f32",
            "jaxdp.permute_and_flip",
            lambda k, x: jaxdp.permute_and_flip(k, x, **common),
            "noise",
            1,
        ),
        jx(
            f"report_noisy_max_gumbel_{tag}_f32",
            "jaxdp.report_noisy_max(noise='gumbel')",
            lambda k, x: jaxdp.report_noisy_max(k, x, noise="gumbel", **common),
            "em",
            2,
        ),
        jx(
            f"top_k_k10_{tag}_f32" if n >= 10 else f"top_k_k2_{tag}_f32",
            "jaxdp.top_k(k=10)" if n >= 10 else "jaxdp.top_k(k=2)",
            lambda k, x: jaxdp.top_k(k, x, min(10, n), **common),
            "noise",
            2,
        ),
    ]
    if mode["prng"]:
        for impl in ("rbg", "unsafe_rbg"):
            cases.append(
                jx(
                    f"exponential_gumbel_{tag}_f32_{impl}",
                    f"jaxdp.exponential(method='gumbel') with a jax.random.key(impl='{impl}')",
                    lambda k, x: jaxdp.exponential(k, x, method="gumbel", **common),
                    "em",
                    2,
                    key_impl=impl,
                    extra_tags=("prng",),
                )
            )
    if n * s <= MAX_TEMP_ELEMENTS[mode_name]:
        for noise, law, wl in (("laplace", "noise", "W3"), ("gumbel", "em", "W1")):
            cases.append(
                Case(
                    f"numpy_{noise}_argmax_{tag}_f64",
                    wl,
                    f"numpy vectorised argmax(logits + {noise} noise), S x n at once",
                    "numpy",
                    law,
                    n,
                    s,
                    1,
                    _py_case(
                        lambda noise=noise: _baselines.numpy_noisy_argmax(
                            scores, EPS, DELTA, s, noise
                        ),
                        r,
                        b,
                    ),
                    False,
                    logs_per_noise=2 if noise == "gumbel" else 1,
                    tags=("noise", "numpy_noise") + (("w3",) if noise == "laplace" else ()),
                )
            )
    return cases


def w2_cases(n: int, rows: int, mode: dict, mode_name: str, main: bool) -> list[Case]:
    """W2: one draw for each of B distinct rows; W3 Laplace on the same shape."""
    r, b = mode["repeats"], mode["budget_s"]
    tag = f"n{fmt(n)}_b{fmt(rows)}"
    size = n * rows
    tags = ("w2", "w2_main") if main else ("w2",)

    def arrays(impl=None):
        def make():
            # Generated on the device, so a 10**9-candidate input never crosses the host.
            x = jax.random.normal(jax.random.key(rows), (rows, n), jnp.float32) * 3.0
            return jax.random.key(0, impl=impl), x

        return make

    def jx(name, impl, fn, law, logs, workload="W2", key_impl=None, extra=()):
        return Case(
            name, workload, impl, "jaxdp", law, n, 1, rows,
            _jax_case(fn, arrays(key_impl), r, b), True, logs_per_noise=logs, tags=tags + extra,
        )  # fmt: skip

    kw = {"epsilon": EPS, "sensitivity": DELTA}
    chosen = _kernels.choose_method(1, n, rows)
    small = size <= MAX_TEMP_ELEMENTS[mode_name]
    cases = [
        jx(
            f"exponential_auto_{tag}_f32",
            f"jaxdp.exponential(method='auto' -> {chosen})",
            lambda k, x: jaxdp.exponential(k, x, method="auto", **kw),
            "em",
            1,
            extra=("jaxdp_em",),
        ),
        jx(
            f"report_noisy_max_laplace_{tag}_f32",
            "jaxdp.report_noisy_max(noise='laplace')",
            lambda k, x: jaxdp.report_noisy_max(k, x, noise="laplace", **kw),
            "noise",
            1,
            workload="W3",
            extra=("w3", "jaxdp_noise"),
        ),
    ]
    cases[0].extra["method"] = chosen
    if small or mode_name == "full":
        cases += [
            jx(
                f"exponential_gumbel_{tag}_f32",
                "jaxdp.exponential(method='gumbel')",
                lambda k, x: jaxdp.exponential(k, x, method="gumbel", **kw),
                "em",
                2,
                extra=("jaxdp_noise",),
            ),
            jx(
                f"permute_and_flip_{tag}_f32",
                "jaxdp.permute_and_flip",
                lambda k, x: jaxdp.permute_and_flip(k, x, **kw),
                "noise",
                1,
                extra=("jaxdp_noise",),
            ),
        ]
    if small:
        cases.append(
            Case(
                f"hand_jax_inverse_cdf_rows_{tag}_f32",
                "W2",
                "hand-written JAX per row: logsumexp + cumsum + vmap(searchsorted)",
                "jax",
                "em",
                n,
                1,
                rows,
                _jax_case(_baselines.hand_inverse_cdf_rows, arrays(), r, b),
                True,
                tags=tags + ("hand",),
            )
        )
        cases.append(
            Case(
                f"jax_categorical_{tag}_f32",
                "W2",
                "jax.random.categorical (one Gumbel per candidate)",
                "jax",
                "em",
                n,
                1,
                rows,
                _jax_case(
                    lambda k, x: _baselines.jax_categorical(k, x, shape=(rows,)), arrays(), r, b
                ),
                True,
                logs_per_noise=2,
                tags=tags + ("categorical",),
            )
        )
        host = _scores((rows, n), seed=rows).astype(np.float64)
        cases += [
            Case(
                f"numpy_inverse_cdf_rows_{tag}_f64",
                "W2",
                "numpy vectorised per-row inverse CDF (cumsum + compare-count)",
                "numpy",
                "em",
                n,
                1,
                rows,
                _py_case(lambda: _baselines.numpy_inverse_cdf_rows(host, EPS, DELTA), r, b),
                False,
                tags=tags + ("numpy_em",),
            ),
            Case(
                f"numpy_laplace_argmax_{tag}_f64",
                "W3",
                "numpy vectorised argmax(logits + Laplace noise), B x n at once",
                "numpy",
                "noise",
                n,
                1,
                rows,
                _py_case(
                    lambda: _baselines.numpy_noisy_argmax(host, EPS, DELTA, None, "laplace"), r, b
                ),
                False,
                tags=tags + ("w3", "numpy_noise"),
            ),
        ]
    if mode["prng"] and main:
        for impl in ("rbg", "unsafe_rbg"):
            cases.append(
                jx(
                    f"report_noisy_max_laplace_{tag}_f32_{impl}",
                    f"jaxdp.report_noisy_max(noise='laplace') with jax.random.key(impl='{impl}')",
                    lambda k, x: jaxdp.report_noisy_max(k, x, noise="laplace", **kw),
                    "noise",
                    1,
                    workload="W3",
                    key_impl=impl,
                    extra=("prng",),
                )
            )
    return cases


def price_bounds(lo: float, hi: float) -> dict[str, tuple[float, float]]:
    """``bounds=`` where ``private_price`` takes it, else the older ``price_range=``."""
    params = inspect.signature(jaxdp.private_price).parameters
    return {"bounds" if "bounds" in params else "price_range": (lo, hi)}


def w4_cases(num_bids: int, s: int, grid: int, mode: dict) -> list[Case]:
    """W4: exact continuous pricing against the exponential mechanism on a grid."""
    r, b = mode["repeats"], mode["budget_s"]
    hi = 10.0
    bids = np.random.default_rng(4).uniform(0.0, hi, num_bids).astype(np.float32)
    probe = None
    try:
        jaxdp.private_price(jax.random.key(0), bids[:10], epsilon=1.0, **price_bounds(0.0, hi))
    except NotImplementedError as err:
        probe = str(err)
    if probe is not None:
        NOTES.append(f"W4 skipped: private_price is not implemented yet ({probe})")
        return []

    def exact(k, x):
        return jaxdp.private_price(k, x, epsilon=EPS, shape=(s,), **price_bounds(0.0, hi))

    def on_grid(k, x):
        prices = jnp.linspace(0.0, hi, grid, dtype=jnp.float32)
        sold = x.shape[0] - jnp.searchsorted(jnp.sort(x), prices, side="left")
        idx = jaxdp.exponential(
            k, prices * sold, epsilon=EPS, sensitivity=hi, shape=(s,), method="auto"
        )
        return prices[idx]

    arrays = lambda: (jax.random.key(0), jnp.asarray(bids))  # noqa: E731
    tag = f"n{fmt(num_bids)}_s{fmt(s)}"
    return [
        Case(
            f"private_price_exact_{tag}_f32",
            "W4",
            "jaxdp.private_price (exact, continuous)",
            "jaxdp",
            "continuous",
            num_bids,
            s,
            1,
            _jax_case(exact, arrays, r, b),
            True,
            tags=("w4",),
        ),
        Case(
            f"private_price_grid_g{fmt(grid)}_{tag}_f32",
            "W4",
            f"jaxdp.exponential over a {grid}-point price grid (approximate)",
            "jaxdp",
            "em",
            grid,
            s,
            1,
            _jax_case(on_grid, arrays, r, b),
            True,
            tags=("w4",),
            extra={"bids": num_bids},
        ),
    ]


def shape_cases(mode_name: str) -> list[Case]:
    """The issue-11 call shapes (C1-C6), each timed against its fast twin, interleaved."""
    mode = MODES[mode_name]
    cases = []
    for pair in _shapes.pairs(mode_name):
        repeats = _shapes.SIZES[mode_name]["c5_repeats"] if pair.metric == "compile" else None

        def run(device, pair=pair, repeats=repeats) -> Measurement:
            with jax.default_device(device):
                m, info = _shapes.measure(
                    pair, repeats or max(3, mode["repeats"]), mode["budget_s"]
                )
            m.extra.update(info)
            return m

        cases.append(
            Case(
                pair.name,
                pair.workload,
                pair.impl,
                "jaxdp",
                "compile" if pair.metric == "compile" else pair.law,
                pair.n,
                pair.draws_per_row,
                pair.rows,
                run,
                True,
                tags=("shape",),
            )
        )
    return cases


NOTES: list[str] = []


def build_cases(mode_name: str) -> list[Case]:
    mode = MODES[mode_name]
    cases: list[Case] = []
    for n, s in mode["w1"]:
        cases += w1_cases(n, s, mode, mode_name, main=True)
    for n, s in mode["w1_sweep"]:
        cases += w1_cases(n, s, mode, mode_name, main=False)
    for n, s in mode["w1_noise"]:
        cases += noise_cases(n, s, mode, mode_name)
    for i, (n, rows) in enumerate(mode["w2"]):
        cases += w2_cases(n, rows, mode, mode_name, main=i == 0)
    for num_bids, s, grid in mode["w4"]:
        cases += w4_cases(num_bids, s, grid, mode)
    cases += shape_cases(mode_name)
    seen: set[str] = set()
    unique = []
    for c in cases:
        if c.name not in seen:
            seen.add(c.name)
            unique.append(c)
    return unique


# ----------------------------------------------------------------------------- running


def _memory_ok(case: Case) -> tuple[bool, str]:
    """Skips cases whose inputs/outputs alone would not fit in available memory."""
    avail = _machine.mem_available_bytes()
    need = 4.0 * case.rows * case.n + 8.0 * case.total_draws
    if case.library == "numpy":
        need = 8.0 * case.rows * case.n * 3 + 16.0 * case.total_draws
    if avail is not None and need * 2.5 > avail:
        return False, f"needs ~{need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available"
    return True, ""


def run_case(case: Case, device: jax.Device | None, backend: str, rates: dict | None) -> dict:
    entry: dict[str, Any] = {
        "name": case.name,
        "workload": case.workload,
        "impl": case.impl,
        "library": case.library,
        "law": case.law,
        "backend": backend if case.on_device else "cpu (host)",
        "n": case.n,
        "draws_per_row": case.draws_per_row,
        "rows": case.rows,
        "draws": case.total_draws,
        **case.extra,
    }
    ok, why = _memory_ok(case)
    if not ok:
        entry["skipped"] = why
        return entry
    try:
        m = case.run(device)
    except Exception as err:  # noqa: BLE001 - a failing peer must not stop the suite
        entry["skipped"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return entry
    draws_timed = case.draws_per_call or case.total_draws
    entry.update(m.as_dict())
    entry["extrapolated_from_draws"] = case.draws_per_call
    if case.law == "compile":  # the times are compile times: no throughput
        entry["draws_per_s"] = entry["candidates_per_s"] = None
        return entry
    entry["draws_per_s"] = draws_timed / m.median_s
    entry["candidates_per_s"] = entry["draws_per_s"] * case.n
    if rates is not None and case.law in ("em", "noise"):
        needs = _floors.workload_needs(
            case.law, case.n, case.total_draws, case.rows, case.logs_per_noise
        )
        floor = _floors.floor_seconds(needs, rates)
        time_for_all = case.total_draws / entry["draws_per_s"]
        entry["floor"] = {**needs, **floor}
        entry["fraction_of_floor"] = floor["floor_s"] / time_for_all
        entry["fraction_of_exp_floor"] = floor["exp_s"] / time_for_all
    return entry


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The suite's options (``python -m benchmarks [suite] --help``)."""
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="the main workloads only (a few minutes on 2 cores)"
    )
    size.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    p.add_argument(
        "--backend",
        choices=("cpu", "gpu", "all"),
        default="cpu",
        help="where the JAX code runs (default: cpu); NumPy and the peers always run on the host",
    )
    _paths.add_output_arguments(p, "<machine>, e.g. cpu-2core-amd-epyc")
    p.add_argument(
        "--only", default=None, metavar="REGEX", help="run only the benchmarks whose name matches"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (plain log lines)")
    p.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="JSON",
        help="another run's results JSON (e.g. a GPU run) to plot against this one",
    )


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks suite",
        description="Throughput of jaxdp's samplers against every peer, with floors.",
    )
    add_arguments(p)
    return p.parse_args(list(argv))


def _backends(choice: str) -> list[tuple[str, jax.Device]]:
    wanted = ["cpu", "gpu"] if choice == "all" else [choice]
    found = []
    for b in wanted:
        try:
            found.append((b, jax.devices(b)[0]))
        except RuntimeError as err:
            if choice != "all":
                raise SystemExit(
                    f"python -m benchmarks: backend {b!r} is not available here ({err}); "
                    "install jax[cuda12] on a machine with an NVIDIA GPU for --backend gpu"
                ) from err
            NOTES.append(f"backend {b} not available: {str(err).splitlines()[0]}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks suite [options]``; returns the exit status."""
    return run(parse_args(sys.argv[1:] if argv is None else argv), argv)


def _progress_bar(total: int, enabled: bool):
    """A tqdm bar with count and ETA on stderr; None (plain log lines) without tqdm or a tty."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="bench", file=sys.stderr, dynamic_ncols=True, leave=True)


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Runs the suite as ``args`` say, writes JSON, markdown and plots, prints a summary."""
    mode_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    NOTES.clear()
    started = time.perf_counter()
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    backends = _backends(args.backend)
    info = _machine.machine_info()
    primary = backends[0][0]
    out = _paths.output_dir(
        args.out, getattr(args, "update_committed", False), _machine.slug(info, primary)
    )
    print(
        f"jaxdp benchmarks, {mode_name} run, on {info['cpu_model']}, {info['cores']} cores"
        f"{', GPU ' + ', '.join(info['gpus']) if info['gpus'] else ''}; results go to {out}/",
        flush=True,
    )
    cases = build_cases(mode_name)
    if args.only:
        pattern = re.compile(args.only)
        cases = [c for c in cases if pattern.search(c.name)]
    todo = [
        (backend, device, case)
        for backend, device in backends
        for case in cases
        if case.on_device or backend == primary
    ]
    bar = _progress_bar(len(todo) + len(backends), not getattr(args, "no_progress", False))
    rates: dict[str, dict] = {}
    results: list[dict] = []
    done = 0
    for backend, device in backends:
        if bar is not None:
            bar.set_description(f"{backend}: hardware limits".ljust(46))
        rates[backend] = _floors.measure_rates(device, MODES[mode_name]["floors"])
        if backend == "gpu":
            named = _floors.gpu_named_floors(device.device_kind)
            if named:
                rates[backend]["named_peaks"] = named
        if bar is not None:
            bar.update(1)
        for b, d, case in todo:
            if b != backend:
                continue
            if bar is not None:
                bar.set_description(f"{backend}: {case.name[:40]}".ljust(46))
            t0 = time.perf_counter()
            entry = run_case(case, d, backend, rates[backend])
            results.append(entry)
            done += 1
            if bar is not None:
                bar.update(1)
                if "skipped" in entry:
                    bar.write(f"  skipped {entry['name']}: {entry['skipped']}", file=sys.stderr)
            else:
                _report.progress(entry, time.perf_counter() - t0, done, len(todo))
    if bar is not None:
        bar.set_description("done".ljust(46))
        bar.close()
    info["load_average_start"] = load_start
    info["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    payload = {
        "schema": _report.SCHEMA_VERSION,
        "suite": "python -m benchmarks",
        "mode": mode_name,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "machine": info,
        "backends": [b for b, _ in backends],
        "rates": rates,
        "results": results,
        "notes": list(NOTES),
    }
    payload["targets"] = _report.targets(payload)
    payload["wall_s"] = time.perf_counter() - started
    compare = None
    if args.compare is not None:
        compare = _report.load(args.compare)
    paths = _report.write(payload, out, plots=not args.no_plots, compare=compare)
    print()
    print(_report.summary(payload))
    print(f"\nFull table: {paths[1]}")
    print(f"Wrote {len(paths)} files to {out}/ in {payload['wall_s']:.0f} s:")
    print("  " + ", ".join(p.name for p in paths))
    return 0
