"""Where a W2 call (many rows, one draw each) spends its time, against its floors.

    PYTHONPATH=. python benchmarks/w2_probe.py [OUT_DIR]

Times, at B x n = 10**5 x 10**3 and 10**4 x 10**5 float32 scores, the reductions
that bound any exact sampler (a row max; a log-sum-exp; the sum of the shifted
exponentials), jaxdp's weights alone (``jaxdp._descent.weights`` and a row sum),
hand-written float32 samplers (a per-row inverse CDF; Gumbel-max), and
``jaxdp.exponential`` with ``method="auto"`` (the sound inverse CDF there) and
``method="gumbel"``, and the weights with their blocks of K summed three ways
(``reduce_window``, strided slices, reshape-and-sum). Each is the median of 10
calls after a warm-up, in one process; the ratios between lines are what it is
for. Written for a GPU lease (``benchmarks/device_check.sh``), where W2's target
is 1e11 candidates/s; it runs anywhere, slowly on a CPU. Writes ``w2_probe.json``
to OUT_DIR when given.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxdp
from jaxdp import _descent

SHAPES = [(100_000, 1000), (10_000, 100_000)]


def median_time(f, *args, reps: int = 10) -> float:
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def variants() -> dict:
    kw = {"epsilon": 1.0, "sensitivity": 1.0}

    def hand_icdf(key, x):
        u = jax.random.uniform(key, (x.shape[0], 1))
        return jnp.sum(jnp.cumsum(jax.nn.softmax(x, -1), -1) < u, -1)

    def weights_only(key, x):
        del key
        return _descent.weights(x, jnp.max(x, -1), jnp.full(x.shape[:1], 0.5)).sum(-1)

    def block_sums(how):
        # the leaves' block sums of K (n % K == 0 at these shapes), three ways
        def f(key, x):
            del key
            w = _descent.weights(x, jnp.max(x, -1), jnp.full(x.shape[:1], 0.5))
            k = _descent.K
            if how == "window":
                return jax.lax.reduce_window(w, 0.0, jax.lax.add, (1, k), (1, k), "VALID")
            if how == "strided":
                return functools.reduce(jnp.add, [w[:, j::k] for j in range(k)])
            return w.reshape(w.shape[0], -1, k).sum(-1)

        return f

    return {
        "max": lambda key, x: jnp.max(x, axis=-1),
        "logsumexp": lambda key, x: jax.nn.logsumexp(x, axis=-1),
        "sum_exp_shifted": lambda key, x: jnp.sum(jnp.exp(x - jnp.max(x, -1, keepdims=True)), -1),
        "weights_only": weights_only,
        "sums_window": block_sums("window"),
        "sums_strided": block_sums("strided"),
        "sums_reshape": block_sums("reshape"),
        "hand_icdf": hand_icdf,
        "hand_gumbel": lambda key, x: jnp.argmax(x + jax.random.gumbel(key, x.shape), -1),
        "jaxdp_auto": lambda key, x: jaxdp.exponential(key, x, **kw),
        "jaxdp_gumbel": lambda key, x: jaxdp.exponential(key, x, method="gumbel", **kw),
    }


def main(out_dir: str | None) -> dict:
    out = {"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()]}
    key = jax.random.key(1)
    for rows, n in SHAPES:
        x = jax.random.normal(jax.random.key(0), (rows, n), jnp.float32) * 3
        for name, f in variants().items():
            t = median_time(jax.jit(f), key, x)
            out[f"B{rows}_n{n}_{name}"] = t
            print(f"B={rows:>6} n={n:>6} {name:>16}: {t * 1e3:8.3f} ms "
                  f"{rows * n / t:9.3e} candidates/s", flush=True)  # fmt: skip
        del x
    if out_dir:
        with open(os.path.join(out_dir, "w2_probe.json"), "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
