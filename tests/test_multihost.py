"""Multi-host jaxdp.montecarlo.run: 2 processes x 2 CPU devices == 1 x 4 == 1 x 1.

Launches real processes joined by ``jax.distributed`` on 127.0.0.1 (gloo CPU
collectives, loopback only, bounded by subprocess timeouts); see
tests/_multihost_worker.py for what each process runs.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdp
from jaxdp import montecarlo

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("_multihost_worker.py")
TIMEOUT = 240  # seconds for the whole group; typically ~30-50 s on 2 shared cores

# the platform cannot run CPU collectives / jax.distributed: skip, saying why
_UNSUPPORTED = (
    "gloo",
    "collectives",
    "distributed",
    "DEADLINE_EXCEEDED",
    "UNAVAILABLE",
    "Address family not supported",
)

SCORES = -jnp.arange(20.0)


def em_trial(key, epsilon):  # the same trial as in the worker
    r = jaxdp.exponential(key, SCORES, epsilon=epsilon, sensitivity=1.0)
    u = jax.random.uniform(jax.random.fold_in(key, 7), (3,))
    return {"gap": -SCORES[r], "idx": r, "u": u, "hit": r == 0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, num_processes: int, devices: int) -> list[subprocess.Popen]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"
    port = _free_port()
    return [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out), str(REPO), str(num_processes), str(pid),
             str(port), str(devices)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in range(num_processes)
    ]  # fmt: skip


def _wait(procs: list[subprocess.Popen], deadline: float) -> list[tuple[int, str]]:
    results = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:  # only the processes this test started
                q.kill()
            pytest.fail(f"multi-host run exceeded {TIMEOUT} s; killed the workers")
        results.append((p.returncode, err))
    return results


def assert_same(a, b):
    la = jax.tree_util.tree_leaves(a, is_leaf=lambda x: isinstance(x, montecarlo.Summary))
    lb = jax.tree_util.tree_leaves(b, is_leaf=lambda x: isinstance(x, montecarlo.Summary))
    assert len(la) == len(lb) > 0
    for sa, sb in zip(la, lb, strict=True):
        for field in montecarlo.Summary._fields:
            x, y = getattr(sa, field), getattr(sb, field)
            if x is None or y is None:
                assert x is None and y is None, field
            else:
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=field)


def test_two_processes_equal_one_process(tmp_path):
    deadline = time.monotonic() + TIMEOUT
    multi = _launch(tmp_path / "2x2.pkl", 2, 2)
    single = _launch(tmp_path / "1x4.pkl", 1, 4)
    multi_results = _wait(multi, deadline)
    single_results = _wait(single, deadline)
    assert single_results[0][0] == 0, single_results[0][1][-3000:]
    for code, err in multi_results:
        if code != 0 and any(s in err for s in _UNSUPPORTED) and "Traceback" in err:
            last = err.strip().splitlines()[-1]
            pytest.skip(f"this platform cannot run jax.distributed CPU collectives: {last}")
        assert code == 0, err[-3000:]
    with open(tmp_path / "2x2.pkl", "rb") as f:
        two_by_two = pickle.load(f)
    with open(tmp_path / "1x4.pkl", "rb") as f:
        one_by_four = pickle.load(f)
    kw = dict(bins={"idx": 20, "u": np.linspace(0.0, 1.0, 11)}, progress=False)
    for n in (5, 30_001):  # neither a multiple of the batch (3072) nor of 4 devices
        one = montecarlo.run(
            em_trial, jax.random.key(0), n, 0.5, batch_size=3000, first_trial=2**32 - 7,
            devices=jax.devices()[:1], **kw
        )  # fmt: skip
        assert one["gap"].count == n
        assert_same(two_by_two[n], one)
        assert_same(one_by_four[n], one)
    # the comparison can fail: a different epsilon gives different summaries
    other = montecarlo.run(
        em_trial, jax.random.key(0), 5, 0.6, batch_size=3000, first_trial=2**32 - 7,
        devices=jax.devices()[:1], **kw
    )  # fmt: skip
    with pytest.raises(AssertionError):
        assert_same(two_by_two[5], other)
