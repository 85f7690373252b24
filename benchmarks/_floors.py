"""The hardware's limits, measured in the same run, and each workload's floor.

Three rates bound every sampler here:

* **RNG**: threefry2x32 uniforms per second, generated and consumed by a
  reduction (nothing written back), with the fused lowering the kernels use;
  the stock ``jax.random.uniform`` rate is recorded beside it.
* **exp**: ``exp`` evaluations per second, fused into a sum (the same rate is
  used for ``log``: transcendental ops).
* **bandwidth**: bytes per second of a streaming read (``sum`` of a large
  array, much larger than the caches).

A workload's floor is the largest of (random numbers it needs / RNG rate),
(transcendental ops / exp rate) and (bytes it must move / bandwidth): no
implementation can beat it on this machine. The fraction of the floor an
implementation reaches is ``floor / its median time``.

What a workload *needs* depends on the law it samples, not on the method:

* the exponential mechanism (any method, any library): one uniform per draw,
  ``n`` exps per distinct row, read the scores once, write the draws;
* noise-based mechanisms (report-noisy-max with Laplace/exponential noise,
  permute-and-flip, top-k): one noise value per candidate per draw, each a
  uniform and a log (a Gumbel value needs two logs).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxdp import _random, _threefry

from ._timing import best_rate

#: Named peak rates of accelerators, for the record (the suite measures its own).
GPU_PEAKS = {
    "H100": {
        "hbm_bytes_per_s": 3.0e12,
        "int32_ops_per_s": 3.3e13,
        "note": "H100 SXM: HBM3 ~3.0-3.35 TB/s; ~33.5 TOPS non-tensor INT32",
    },
    "H200": {
        "hbm_bytes_per_s": 4.3e12,
        "int32_ops_per_s": 3.3e13,
        "note": "H200: HBM3e ~4.3-4.8 TB/s; same SMs as H100",
    },
}

#: Integer ops per 32-bit threefry2x32 word as JAX generates them (one full
#: 2x32 hash of 20 rounds per output word, ~5 ops a round plus key injections).
THREEFRY_INT_OPS_PER_WORD = 115


def gpu_named_floors(device_kind: str) -> dict[str, Any] | None:
    for name, peaks in GPU_PEAKS.items():
        if name.lower() in device_kind.lower():
            rng = peaks["int32_ops_per_s"] / THREEFRY_INT_OPS_PER_WORD
            return {"name": name, **peaks, "threefry_words_per_s": rng}
    return None


def measure_rates(device: jax.Device, size: str) -> dict[str, Any]:
    """RNG, exp and bandwidth rates on ``device``; ``size`` is smoke/quick/full."""
    n_rng, n_exp, n_bw, repeats = {
        "smoke": (1 << 16, 1 << 16, 1 << 20, 2),
        "quick": (1 << 22, 1 << 22, 1 << 25, 5),
        "full": (1 << 24, 1 << 24, 1 << 26, 9),
    }[size]
    with jax.default_device(device):
        key = jax.device_put(jax.random.key(0), device)
        x_exp = jax.device_put(jnp.linspace(-10.0, 0.0, n_exp, dtype=jnp.float32), device)
        x_bw = jax.device_put(jnp.ones((n_bw,), jnp.float32), device)

        def fused_uniforms(k):
            return jnp.sum(_random.uniform(_threefry.fast_key(k), (n_rng,), jnp.float32))

        def stock_uniforms(k):
            return jnp.sum(jax.random.uniform(k, (n_rng,), jnp.float32))

        rates = {
            "rng_per_s": best_rate(n_rng, fused_uniforms, (key,), repeats),
            "rng_stock_per_s": best_rate(n_rng, stock_uniforms, (key,), repeats),
            "exp_per_s": best_rate(n_exp, lambda x: jnp.sum(jnp.exp(x)), (x_exp,), repeats),
            "bytes_per_s": best_rate(4.0 * n_bw, jnp.sum, (x_bw,), repeats),
        }
    rates["sizes"] = {"rng": n_rng, "exp": n_exp, "bandwidth_floats": n_bw}
    rates["how"] = (
        "fastest of repeats: sum of fused-threefry uniforms; sum(exp(x)); sum(x) streamed "
        f"from a {4 * n_bw / 2**20:.0f} MiB array"
    )
    return rates


def workload_needs(law: str, n: int, draws: int, rows: int, logs_per_noise: int = 1) -> dict:
    """Random numbers, transcendental ops and bytes a workload needs at least."""
    if law == "noise":
        randoms = float(draws) * n
        trans = float(draws) * n * logs_per_noise
    else:  # the exponential mechanism's law
        randoms = float(draws)
        trans = float(rows) * n
    moved = 4.0 * rows * n + 4.0 * draws
    return {"randoms": randoms, "transcendentals": trans, "bytes": moved}


def floor_seconds(needs: dict, rates: dict) -> dict[str, Any]:
    parts = {
        "rng_s": needs["randoms"] / rates["rng_per_s"],
        "exp_s": needs["transcendentals"] / rates["exp_per_s"],
        "bytes_s": needs["bytes"] / rates["bytes_per_s"],
    }
    bound = max(parts, key=parts.get)
    return {**parts, "floor_s": parts[bound], "bound": bound[:-2]}
