"""Sphinx configuration of jaxdp's API reference: ``sphinx-build -W -b html docs docs/_build``.

The pages are built from the docstrings (Google style, read by napoleon). The
mechanisms and continuous-range pages list whatever ``jaxdp.__all__`` exports, so
a function added to the package appears without editing these pages.
"""

from __future__ import annotations

import inspect
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)  # document this checkout, not another installed jaxdp

import jaxdp  # noqa: E402

project = "jaxdp"
author = "jaxdp developers"
copyright = "jaxdp developers, Apache-2.0"  # noqa: A001 - Sphinx's name
release = version = jaxdp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {"description": "Differentially private selection in JAX"}

autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes as fields of their class: no second description of a NamedTuple's fields.
napoleon_use_ivar = True
napoleon_use_rtype = False
# Docstrings are written for people (and help()); not every cross-reference resolves.
nitpicky = False

# ----------------------------------------------------------------------------- API pages

#: Finite-range pages: section title -> names, in order. Exported names not listed here
#: land in "Other functions", so a new public function always appears.
MECHANISM_SECTIONS = {
    "Selection over a finite range": [
        "exponential",
        "exponential_log_probs",
        "report_noisy_max",
        "permute_and_flip",
        "top_k",
        "joint_top_k",
        "exponential_streaming",
    ],
    "Additive noise and categorical data": [
        "laplace",
        "gaussian",
        "randomized_response",
        "private_mode",
    ],
    "Private learning and selection": ["select_hypothesis", "select_private_candidate"],
    "Keys": ["random_key"],
    "Checking traced arguments": ["checked"],
}
CONTINUOUS = ["exponential_piecewise", "private_price", "private_quantile", "private_quantiles"]


def _public_functions() -> list[str]:
    return [n for n in jaxdp.__all__ if not inspect.ismodule(getattr(jaxdp, n, None))]


def _is_continuous(name: str) -> bool:
    return name in CONTINUOUS or getattr(getattr(jaxdp, name), "__module__", "").endswith(
        "_continuous"
    )


def _section(title: str, names: list[str]) -> list[str]:
    if not names:
        return []
    lines = [title, "-" * len(title), ""]
    for n in names:
        lines += [f".. autofunction:: jaxdp.{n}", ""]
    return lines


def _api_block(which: str) -> str:
    public = _public_functions()
    if which == "continuous":
        names = [n for n in CONTINUOUS if n in public]
        names += [n for n in public if _is_continuous(n) and n not in names]
        return "\n".join(_section("Functions", names))
    lines: list[str] = []
    listed: set[str] = set()
    for title, names in MECHANISM_SECTIONS.items():
        present = [n for n in names if n in public and not _is_continuous(n)]
        listed.update(present)
        lines += _section(title, present)
    rest = [n for n in public if n not in listed and not _is_continuous(n)]
    lines += _section("Other functions", rest)
    return "\n".join(lines)


def _expand(app, docname, source):
    """Replaces a line ``.. jaxdp-api:: mechanisms|continuous`` with autodoc directives."""
    text = source[0]
    for which in ("mechanisms", "continuous"):
        marker = f".. jaxdp-api:: {which}"
        if marker in text:
            text = text.replace(marker, _api_block(which))
    source[0] = text


# ----------------------------------------------------------------------------- docstrings

#: ``|x|`` written for an absolute value or a size in plain docstring text, which
#: reStructuredText would read as a substitution reference.
_BARS = re.compile(r"(?<![\\|\w])\|(?=[^\s|])([^|`\n]*?[^\s|\\])\|(?![\w|])")


def _escape_bars(app, what, name, obj, options, lines):
    """Escapes ``|x|`` outside math, literal blocks, doctests, tables and inline code."""
    verbatim_indent = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if verbatim_indent is not None:
            if not stripped or indent > verbatim_indent:
                continue
            verbatim_indent = None
        if stripped.endswith("::") or stripped.startswith(".. math::"):
            verbatim_indent = indent  # the indented block below is verbatim / LaTeX
            continue
        if stripped.startswith((">>>", "...", "|", "+-", "+=")):
            continue
        parts = re.split(r"(``.*?``|`[^`]*`)", line)
        parts[::2] = [_BARS.sub(r"\\|\1\\|", s) for s in parts[::2]]
        lines[i] = "".join(parts)


def setup(app):
    app.connect("source-read", _expand)
    app.connect("autodoc-process-docstring", _escape_bars)
    return {"parallel_read_safe": True}
