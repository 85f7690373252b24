"""Every ```python block of the README runs (blocks run in order, sharing names)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"

# Modules of jaxdp's extras that README blocks import. The [test] extra installs them
# all; where one is missing (a machine with its own stack, such as a lent GPU), the
# blocks that import it are skipped and the test says so, and every other block runs.
OPTIONAL = {"dp_accounting", "optax", "matplotlib", "tqdm"}


def test_readme_python_blocks_run():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        pytest.fail("README has no python examples")
    namespace: dict = {}
    missing = set()
    for block in blocks:
        if "# not run in tests" in block:
            continue
        try:
            exec(compile(block, str(README), "exec"), namespace)
        except ModuleNotFoundError as e:
            if e.name not in OPTIONAL:
                raise
            missing.add(e.name)
    if missing:
        pytest.skip(f"README blocks that import {sorted(missing)} not run (not installed)")
