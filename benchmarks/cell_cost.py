"""Cost of the continuous samplers' released point (``jaxdp/_cell.py``).

Run from the repository root, once per commit to compare (best of 5 after a
warm-up, milliseconds; the machine's noise is what two runs of one commit
differ by)::

    PYTHONPATH=. python benchmarks/cell_cost.py                # prints JSON
    PYTHONPATH=. python benchmarks/cell_cost.py --out FILE     # and writes it

Shapes: ``private_price`` and ``private_quantile`` at one draw, 10**4 draws
(n = 10**3) and 10**6 draws (n = 10**4); ``private_quantiles`` (three levels,
10**4 draws); a ``vmap`` of ``private_quantile`` over 256 rows, one draw each
(the clip norm of a DP-SGD step); and the compile time of ``private_quantile``.
The committed runs are in ``benchmarks/results/cpu-2core-amd-epyc/cell/``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp


def _best(f, *args, repeats: int = 5) -> float:
    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - start)
    return best


def measure() -> dict[str, float]:
    rng = np.random.default_rng(0)
    key = jax.random.key(0)
    out = {}
    for n, s in [(10**3, 1), (10**3, 10**4), (10**4, 10**6)]:
        x = jnp.asarray(rng.uniform(0, 10, n).astype(np.float32))

        def price(k, x, s=s):
            return jaxdp.private_price(k, x, epsilon=1.0, bounds=(0.0, 10.0), shape=(s,))

        def quantile(k, x, s=s):
            return jaxdp.private_quantile(k, x, 0.5, epsilon=1.0, bounds=(0.0, 10.0), shape=(s,))

        out[f"private_price n={n} S={s}"] = _best(jax.jit(price), key, x)
        out[f"private_quantile n={n} S={s}"] = _best(jax.jit(quantile), key, x)
    x = jnp.asarray(rng.normal(size=(10**3,)).astype(np.float32))
    levels = jnp.array([0.1, 0.5, 0.9])

    def quantiles(k, x):
        return jaxdp.private_quantiles(
            k, x, levels, epsilon=1.0, bounds=(-5.0, 5.0), shape=(10**4,)
        )

    out["private_quantiles n=1000 m=3 S=10000"] = _best(jax.jit(quantiles), key, x)
    rows = jnp.asarray(rng.uniform(0, 10, (256, 1000)).astype(np.float32))

    def one(k, x):
        return jaxdp.private_quantile(k, x, 0.5, epsilon=1.0, bounds=(0.0, 10.0))

    out["vmap(private_quantile) 256 rows n=1000"] = _best(
        jax.jit(jax.vmap(one, in_axes=(None, 0))), key, rows
    )
    jax.clear_caches()
    start = time.perf_counter()
    jax.jit(one).lower(key, rows[0]).compile()
    out["compile private_quantile n=1000"] = time.perf_counter() - start
    return {k: round(v * 1e3, 3) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {
        "commit": commit,
        "machine": platform.processor() or platform.machine(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "milliseconds": measure(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
