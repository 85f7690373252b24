"""Every script in examples/ runs at its tiny size (``--tiny``), as a user would start it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
NEEDS = {"dp_sgd_quantile_clipping.py": "optax", "montecarlo_accuracy_study.py": "matplotlib"}


def test_there_are_four_examples():
    assert len(EXAMPLES) >= 4, EXAMPLES


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_tiny(script, tmp_path):
    if script.name in NEEDS:
        pytest.importorskip(NEEDS[script.name])
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    env.pop("JAXDP_TINY", None)
    proc = subprocess.run(
        [sys.executable, str(script), "--tiny"],
        cwd=tmp_path,  # anything a script writes lands here, not in the checkout
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip(), "an example should print what it found"
    if script.name == "montecarlo_accuracy_study.py":
        assert (tmp_path / "jaxdp-results" / "examples" / "montecarlo_accuracy.png").exists()
