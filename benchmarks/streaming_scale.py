"""The streaming exponential mechanism over 10**9 candidates: time and peak memory.

Run from the repository root (not part of the test suite: it takes minutes)::

    python -m benchmarks.streaming_scale            # writes ./jaxdp-results/streaming_1e9.json
    python -m benchmarks.streaming_scale --n 100000000 --out /tmp/s.json

Each configuration runs in a fresh subprocess, so its peak resident memory
(``ru_maxrss`` of that process, read at its end) is its own. The subprocess
also reports the resident memory right after importing jax and jaxdp and after
the first call, the time of the first call (compile + run)
and of a second call with a new key and a new dataset (run only), and checks
the draws against the utility's peak.

The utility is a threshold-style score of the index with data: u(i) =
-|i - center| / scale, computed in int32 then float32, with ``center`` passed as
``data`` (one compiled function for every dataset).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("jaxdp-results") / "streaming_1e9.json"  # under the working directory
CONFIGS = [
    {"method": "inverse_cdf", "draws": 1},
    {"method": "inverse_cdf", "draws": 1000},
    {"method": "gumbel", "draws": 1},
]


def _rss_mib() -> float:
    # Linux reports ru_maxrss in KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(n: int, chunk_size: int, method: str, draws: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxdp

    rss_import = _rss_mib()

    def score_fn(i, center):
        return -jnp.abs(i - center).astype(jnp.float32) / 1e5

    def run(key, center):
        out = jaxdp.exponential_streaming(
            key,
            score_fn,
            n,
            epsilon=1.0,
            sensitivity=1.0,
            chunk_size=chunk_size,
            shape=(draws,),
            data=jnp.int32(center),
            method=method,
        )
        return np.asarray(out.block_until_ready())

    t0 = time.perf_counter()
    first = run(jax.random.key(0), n // 3)
    t_first = time.perf_counter() - t0
    rss_warm = _rss_mib()
    t0 = time.perf_counter()
    second = run(jax.random.key(1), (2 * n) // 3)
    t_second = time.perf_counter() - t0
    return {
        "method": method,
        "draws": draws,
        "num_candidates": n,
        "chunk_size": chunk_size,
        "seconds_first_call_compile_and_run": t_first,
        "seconds_second_call_new_data": t_second,
        "candidates_per_second": n / t_second,
        "rss_mib_after_import": rss_import,
        "rss_mib_after_first_call": rss_warm,
        "max_abs_distance_to_peak_first": int(np.max(np.abs(first.astype(np.int64) - n // 3))),
        "max_abs_distance_to_peak_second": int(
            np.max(np.abs(second.astype(np.int64) - (2 * n) // 3))
        ),
        "peak_rss_mib": _rss_mib(),  # ru_maxrss of this process: its peak over its life
        "all_in_range": bool(np.all((first >= 0) & (first < n) & (second >= 0) & (second < n))),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.streaming_scale")
    parser.add_argument("--n", type=int, default=10**9, help="num_candidates")
    parser.add_argument("--chunk-size", type=int, default=2**20)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "DRAWS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        res = child(args.n, args.chunk_size, args.child[0], int(args.child[1]))
        print(json.dumps(res))
        return res

    import jax

    raw = list(sys.argv[1:] if argv is None else argv)
    results = []
    for cfg in CONFIGS:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.streaming_scale",
            "--n",
            str(args.n),
            "--chunk-size",
            str(args.chunk_size),
            "--child",
            cfg["method"],
            str(cfg["draws"]),
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        res["process_wall_seconds"] = wall
        results.append(res)
        print(json.dumps(res), flush=True)
    out = {
        "command": "python -m benchmarks.streaming_scale " + " ".join(raw),
        "utility": "u(i) = -|i - center| / 1e5 (int32 difference, float32 score), "
        "epsilon = 1, sensitivity = 1, data = center",
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15_min_at_end": list(os.getloadavg()),
        "platform": platform.platform(),
        "note": "peak_rss_mib is the subprocess's ru_maxrss (whole process: Python, jax, "
        "XLA runtime, compilation and the computation); rss_mib_after_import is the baseline "
        "before any jaxdp call",
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
