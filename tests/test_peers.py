"""The peer libraries of ``python -m benchmarks`` import and sample when installed.

They come with the ``[bench]`` extra. A peer that is installed but does not import
(as diffprivlib 0.6.6 under scikit-learn 1.9) fails here instead of turning into a
"not importable" note in a benchmark run; a peer that is not installed is skipped,
saying so.
"""

import importlib
import importlib.metadata

import numpy as np
import pytest

from benchmarks import _baselines


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("dist", sorted(_baselines.PEERS))
def test_installed_peer_imports_and_samples(dist):
    if not _installed(dist):
        pytest.skip(f"{dist} is not installed: pip install -e '.[bench]' to compare against it")
    importlib.import_module(_baselines.PEERS[dist])  # raises, naming the cause, if broken
    scores = np.array([3.0, 1.0, 2.0, 0.0])
    samplers, notes = _baselines.dp_library_samplers(scores, 1.0, 1.0, draws=3)
    assert not [n for n in notes if n.startswith(dist)], notes
    mine = {name: fn for name, (fn, _law) in samplers.items() if name.startswith(dist)}
    assert mine, f"the suite has no sampler for {dist}"
    for name, fn in mine.items():
        draws = np.asarray(fn(), dtype=np.int64)
        assert draws.shape == (3,), name
        assert ((draws >= 0) & (draws < len(scores))).all(), (name, draws)
