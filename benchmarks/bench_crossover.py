"""``python -m benchmarks crossover``: where Gumbel-max beats the inverse CDF.

Times ``jaxdp.exponential`` with ``method="gumbel"`` and ``"inverse_cdf"`` over
a grid of (candidates n, draws per row S, rows B), the two compiled calls
alternately in one process (ABBA rounds, so both run under the same load), and
prints the median of the per-round ratios, which is faster, and what
``method="auto"`` (``jaxdp._tuning.choose_method`` for this backend) picks. The
``auto`` rule's constants (``jaxdp._tuning.GUMBEL_MAX_CANDIDATES``) come from
this command; its output is committed as
``benchmarks/results/<machine>/crossover_full.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp
from jaxdp import _tuning

from . import _machine, _paths
from ._timing import compiled_call, time_interleaved

GRID = {
    "quick": {"n": (2, 8, 32, 256), "s": (1, 64), "b": (1, 1024)},
    "full": {
        "n": (2, 4, 8, 16, 24, 32, 48, 64, 256, 1024, 8192),
        "s": (1, 2, 4, 16, 64, 1024),
        "b": (1, 1024),
    },
}
MAX_NOISE = 4 * 10**7  # largest S * B * n timed with the Gumbel method


def measure(n: int, s: int, b: int, repeats: int) -> tuple[float, float, float]:
    """(gumbel median s, inverse_cdf median s, median of the per-round ratios gumbel /
    inverse_cdf), the two timed alternately."""
    scores = jnp.asarray(np.random.default_rng(n).normal(size=(b, n)) * 3.0, jnp.float32)
    shape = (s, b)

    def call(method: str):
        def fn(k, x):
            return jaxdp.exponential(k, x, epsilon=1.0, sensitivity=1.0, shape=shape, method=method)

        return compiled_call(fn, (jax.random.key(0), scores))[0]

    t_g, t_i, ratios = time_interleaved(
        call("gumbel"), call("inverse_cdf"), repeats=repeats, budget_s=4.0
    )
    return statistics.median(t_g), statistics.median(t_i), statistics.median(ratios)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m benchmarks crossover``."""
    p.add_argument("--quick", action="store_true", help="a 4 x 2 x 2 grid instead of 11 x 6 x 2")
    _paths.add_output_arguments(p, "<machine>")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks crossover", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(list(sys.argv[1:] if argv is None else argv)))


def run(args: argparse.Namespace) -> int:
    """Times the grid, prints a table, writes ``crossover_<quick|full>.json``."""
    grid = GRID["quick" if args.quick else "full"]
    repeats = 4 if args.quick else 10
    backend = jax.default_backend()
    rows = []
    print(
        "| rows B | draws per row S | candidates n | gumbel ms | inverse_cdf ms | "
        "gumbel / inverse_cdf | faster | auto picks |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for b in grid["b"]:
        for s in grid["s"]:
            for n in grid["n"]:
                if s * b * n > MAX_NOISE:
                    continue
                t_g, t_i, ratio = measure(n, s, b, repeats)
                auto = _tuning.choose_method(s, n, b, backend)
                best = "gumbel" if ratio < 1 else "inverse_cdf"
                rows.append(
                    {"n": n, "s": s, "b": b, "gumbel_s": t_g, "inverse_cdf_s": t_i,
                     "ratio": ratio, "faster": best, "auto": auto,
                     "auto_loss": max(ratio, 1 / ratio) if auto != best else 1.0}
                )  # fmt: skip
                print(
                    f"| {b} | {s} | {n} | {t_g * 1e3:.3g} | {t_i * 1e3:.3g} | "
                    f"{ratio:.2f} | {best} | {auto}{'' if auto == best else ' (slower)'} |",
                    flush=True,
                )
    info = _machine.machine_info()
    out = _paths.output_dir(args.out, args.update_committed, _machine.slug(info, backend))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"crossover_{'quick' if args.quick else 'full'}.json"
    path.write_text(
        json.dumps(
            {
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"
                ),
                "machine": info,
                "backend": backend,
                "command": "python -m benchmarks crossover" + (" --quick" if args.quick else ""),
                "columns": "rows B | draws per row S | candidates n | gumbel ms | "
                "inverse_cdf ms | median of per-round gumbel/icdf | faster | auto",
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    disagree = [r for r in rows if r["faster"] != r["auto"]]
    print(
        f"\nauto agrees with the measurement on {len(rows) - len(disagree)}/{len(rows)} "
        f"points; worst loss {max([r['auto_loss'] for r in rows] + [1.0]):.2f}x; wrote {path}"
    )
    return 0
