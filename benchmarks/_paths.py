"""Where results go: the user's working directory by default, never the source tree.

``python -m benchmarks`` and its subcommands write under ``./jaxdp-results/`` in
the current working directory (or ``--out DIR``). The results committed with
the repository, under ``benchmarks/results/``, are rewritten only when asked for
with ``--update-committed``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: The results committed with the repository (refreshed by ``--update-committed``).
COMMITTED = Path(__file__).resolve().parent / "results"
#: The default results folder, relative to the current working directory.
DEFAULT_ROOT = Path("jaxdp-results")


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """Adds ``--out`` and ``--update-committed`` (mutually exclusive) to ``parser``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"results folder (default: ./{DEFAULT_ROOT}/{what} in the current directory)",
    )
    group.add_argument(
        "--update-committed",
        action="store_true",
        help=f"write into the repository's committed results, benchmarks/results/{what} "
        "(maintainers refreshing the published figures)",
    )


def output_dir(out: Path | None, update_committed: bool, what: str) -> Path:
    """The folder to write to: ``out``, the committed folder, or ``./jaxdp-results/what``."""
    if update_committed:
        return COMMITTED / what
    if out is not None:
        return Path(out)
    return DEFAULT_ROOT / what
