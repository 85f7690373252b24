"""What the numbers were measured on: CPU, cores, memory, GPU, versions, commit."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import jax
import jaxlib
import numpy as np


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        if ":" not in line:
            if info:
                break  # first processor block only
            continue
        k, v = (s.strip() for s in line.split(":", 1))
        info.setdefault(k, v)
    return info


def _mem_total_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def mem_available_bytes() -> int | None:
    """Memory the OS reports as available now (Linux), else None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    commit = out.stdout.strip()
    return commit + ("+dirty" if dirty.stdout.strip() else "")


def _gpu_names() -> list[str]:
    try:
        return [d.device_kind for d in jax.devices("gpu")]
    except RuntimeError:
        return []


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine_info() -> dict[str, Any]:
    """A JSON-ready description of this machine and software stack."""
    cpu = _cpuinfo()
    model = cpu.get("model name") or platform.processor() or platform.machine()
    flags = cpu.get("flags", "").split()
    simd = [f for f in ("avx2", "avx512f", "avx512bw", "fma", "neon") if f in flags]
    return {
        "cpu_model": model,
        "cpu_family_model": (
            f"family {cpu['cpu family']} model {cpu['model']}" if "cpu family" in cpu else None
        ),
        "cpu_vendor": cpu.get("vendor_id"),
        "cpu_simd": simd,
        "hypervisor": "hypervisor" in flags,
        "cores": cpu_cores(),
        "memory_bytes": _mem_total_bytes(),
        "gpus": _gpu_names(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "jax_backends": sorted({d.platform for d in jax.devices()}),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "commit": _git_commit(),
    }


def slug(info: dict[str, Any], backend: str) -> str:
    """A folder name for results: ``cpu-2core-amd-epyc``, ``gpu-nvidia-h100-80gb-hbm3``."""
    if backend == "gpu" and info["gpus"]:
        name = info["gpus"][0]
        return "gpu-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    model = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", "", info["cpu_model"].lower())
    model = re.sub(r"[^a-z0-9]+", "-", model).strip("-")
    return f"cpu-{info['cores']}core-{model}"
