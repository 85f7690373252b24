"""One process of a multi-process ``jaxdp.montecarlo.run`` (driven by tests/test_multihost.py).

Usage::

    python tests/_multihost_worker.py OUT REPO NUM_PROCESSES PROCESS_ID PORT DEVICES [--measure]

Each process sets ``DEVICES`` host-platform CPU devices, joins
``jax.distributed`` on ``127.0.0.1:PORT`` (gloo CPU collectives) when
``NUM_PROCESSES > 1``, runs the same studies, and process 0 pickles the summaries
to ``OUT``. With ``--measure`` it also times runs of a cheap trial and the
cross-process gather per batch, and writes them as JSON next to ``OUT``.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time

out_path, repo, num_processes, process_id, port, devices = sys.argv[1:7]
measure = "--measure" in sys.argv[7:]
num_processes, process_id, devices = int(num_processes), int(process_id), int(devices)
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
).strip()
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, repo)

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
if num_processes > 1:
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=60,
    )

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxdp  # noqa: E402
from jaxdp import montecarlo  # noqa: E402

SCORES = -jnp.arange(20.0)


def em_trial(key, epsilon):
    """A jaxdp sampler, a vector metric, a bool and an int (for a histogram)."""
    r = jaxdp.exponential(key, SCORES, epsilon=epsilon, sensitivity=1.0)
    u = jax.random.uniform(jax.random.fold_in(key, 7), (3,))
    return {"gap": -SCORES[r], "idx": r, "u": u, "hit": r == 0}


def uniform_trial(key):
    return jax.random.uniform(key)


assert jax.process_count() == num_processes, jax.process_count()
assert len(jax.devices()) == num_processes * devices, jax.devices()
kw = dict(bins={"idx": 20, "u": np.linspace(0.0, 1.0, 11)}, progress=False)
results = {}
for n in (5, 30_001):
    results[n] = montecarlo.run(
        em_trial, jax.random.key(0), n, 0.5, batch_size=3000, first_trial=2**32 - 7, **kw
    )

timings = {}
if measure:
    from jax.experimental import multihost_utils

    real_to_host = montecarlo._to_host
    gathers: list[float] = []

    def timed_to_host(tree):
        t0 = time.perf_counter()
        out = real_to_host(tree)
        gathers.append(time.perf_counter() - t0)
        return out

    montecarlo._to_host = timed_to_host
    for batch in (2**12, 2**16, 2**20):
        num = 2**22
        montecarlo.run(uniform_trial, jax.random.key(1), batch, batch_size=batch, progress=False)
        multihost_utils.sync_global_devices("warm")
        gathers.clear()
        t0 = time.perf_counter()
        montecarlo.run(uniform_trial, jax.random.key(1), num, batch_size=batch, progress=False)
        wall = time.perf_counter() - t0
        timings[str(batch)] = {
            "trials": num,
            "batches": num // batch,
            "seconds": wall,
            "trials_per_s": num / wall,
            "to_host_ms_median": 1e3 * float(np.median(gathers)),
            "to_host_ms_mean": 1e3 * float(np.mean(gathers)),
        }
    montecarlo._to_host = real_to_host

if process_id == 0:
    with open(out_path, "wb") as f:
        pickle.dump(results, f)
    if measure:
        with open(out_path + ".json", "w") as f:
            json.dump(
                {
                    "processes": num_processes,
                    "devices_per_process": devices,
                    "jax": jax.__version__,
                    "timings": timings,
                },
                f,
                indent=1,
            )
if num_processes > 1:
    jax.distributed.shutdown()
