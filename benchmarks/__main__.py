"""Entry point of ``python -m benchmarks``: the suite, or a subcommand."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

USAGE = """usage:
  python -m benchmarks [--quick] [--backend cpu|gpu|all] [--out DIR] [--only REGEX]
  python -m benchmarks crossover [--quick] [--out DIR]
  python -m benchmarks pricing [ARGS...]
  python -m benchmarks study NAME [ARGS...]"""


def _delegate(module: str, argv: list[str], what: str) -> int:
    """Runs ``benchmarks.<module>.main(argv)``, imported only now."""
    name = f"benchmarks.{module}"
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        print(
            f"python -m benchmarks {what}: {name} is not available in this checkout "
            f"(no benchmarks/{module}.py); nothing was run.",
            file=sys.stderr,
        )
        return 2
    result = mod.main(argv)
    return int(result or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        print()
        from . import _suite

        return _suite.main(["--help"])
    if argv and argv[0] == "pricing":
        return _delegate("pricing", argv[1:], "pricing")
    if argv and argv[0] == "study":
        if len(argv) < 2:
            print("python -m benchmarks study: give a study name: " + USAGE, file=sys.stderr)
            return 2
        return _delegate("studies", argv[1:], "study")
    if argv and argv[0] == "crossover":
        from . import bench_crossover

        return bench_crossover.main(argv[1:])
    from . import _suite

    return _suite.main(argv)


if __name__ == "__main__":
    sys.exit(main())
