"""Cost of several processes in jaxdp.montecarlo.run: ``python -m benchmarks.multihost``.

Runs tests/_multihost_worker.py (``--measure``) as one process with D devices
and as D processes with one device each, joined by ``jax.distributed`` on
127.0.0.1 (gloo CPU collectives), and records for a cheap trial (one uniform
draw) at several batch sizes: trials/s and the host time per batch spent
fetching the devices' reductions (``device_get`` with one process, a
cross-process all-gather with several). Writes
``benchmarks/results/studies/multihost.json`` (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
WORKER = REPO / "tests" / "_multihost_worker.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(processes: int, devices: int, tmp: Path, timeout: float) -> dict:
    out = tmp / f"{processes}x{devices}.pkl"
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    port = _port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out), str(REPO), str(processes), str(pid), str(port),
             str(devices), "--measure"],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for pid in range(processes)
    ]  # fmt: skip
    errors = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        if p.returncode:
            errors.append(err[-2000:])
    if errors:
        raise RuntimeError("\n".join(errors))
    return json.loads(Path(str(out) + ".json").read_text())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.multihost", description=__doc__)
    parser.add_argument("--devices", type=int, default=2, help="devices in all (default 2)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "studies")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for processes, per in ((1, args.devices), (args.devices, 1)):
            results[f"{processes}x{per}"] = _run(processes, per, Path(tmp), args.timeout)
    single, multi = results[f"1x{args.devices}"], results[f"{args.devices}x1"]
    rows = []
    for batch, s in single["timings"].items():
        m = multi["timings"][batch]
        rows.append(
            f"batch {int(batch):>8,}: 1 process {s['trials_per_s']:.3g} trials/s "
            f"(fetch {s['to_host_ms_median']:.2f} ms/batch); {args.devices} processes "
            f"{m['trials_per_s']:.3g} trials/s (all-gather {m['to_host_ms_median']:.2f} ms/batch)"
        )
    payload = {
        "command": f"python -m benchmarks.multihost --devices {args.devices}",
        "cpu_count": os.cpu_count(),
        "results": results,
        "summary": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "multihost.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print("\n".join(rows))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
