"""Every ```python block of the README runs (blocks run in order, sharing names)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        pytest.fail("README has no python examples")
    namespace: dict = {}
    for block in blocks:
        if "# not run in tests" in block:
            continue
        exec(compile(block, str(README), "exec"), namespace)
