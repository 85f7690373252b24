"""``python -m benchmarks``: one command line, with subcommands.

::

    python -m benchmarks [suite] [--quick] [--backend cpu|gpu|all] [--out DIR] ...
    python -m benchmarks crossover [--quick] [--out DIR]
    python -m benchmarks tuning [--quick] [--only SECTION] [--out DIR]
    python -m benchmarks pricing [--quick] [--draws N] [--out DIR]
    python -m benchmarks study NAME [ARGS...]

``suite`` is the default. Every subcommand writes under ``./jaxdp-results/`` in the
current directory unless given ``--out DIR``; ``--update-committed`` rewrites the
results committed in ``benchmarks/results/`` instead. ``python -m benchmarks
COMMAND --help`` lists each one's options.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import _paths

SUBCOMMANDS = ("suite", "crossover", "tuning", "pricing", "study")

#: Study modules, in the order they are searched: module -> the names it is known to run
#: (a module may define more; ``STUDIES``, ``ALIASES`` and ``EXTRA_NAMES`` are read from it).
STUDY_MODULES: dict[str, tuple[str, ...]] = {
    "studies": (
        "utility-theorem",
        "selection-gap",
        "most-common",
        "randomized-response",
        "private-learner",
        "throughput",
        "all",
    ),
    "selection_studies": (
        "joint-quantiles",
        "joint-top-k",
        "private-selection",
        "throughput-selection",
    ),
}


def _import(module: str):
    """``benchmarks.<module>``, or None if this checkout has no such file."""
    name = f"benchmarks.{module}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return None


def _delegate(module: str, argv: list[str], what: str) -> int:
    """Runs ``benchmarks.<module>.main(argv)``, imported only now."""
    mod = _import(module)
    if mod is None:
        print(
            f"python -m benchmarks {what}: benchmarks.{module} is not available in this "
            f"checkout (no benchmarks/{module}.py); nothing was run.",
            file=sys.stderr,
        )
        return 2
    result = mod.main(argv)
    return result if isinstance(result, int) else 0


def _study_names(module: str, aliases: bool = True) -> tuple[list[str], bool]:
    """(names the module runs, whether it is present). Absent modules list their known names."""
    mod = _import(module)
    if mod is None:
        return list(STUDY_MODULES[module]), False
    names = list(STUDY_MODULES[module])
    for attr in ("STUDIES", "EXTRA_NAMES") + (("ALIASES",) if aliases else ()):
        for n in getattr(mod, attr, ()) or ():
            if n not in names:
                names.append(n)
    return names, True


def _study_help() -> str:
    lines = ["studies (python -m benchmarks study NAME --help for a study's options):", ""]
    for module in STUDY_MODULES:
        names, present = _study_names(module, aliases=False)
        where = f"benchmarks/{module}.py" + ("" if present else " (not in this checkout)")
        lines.append(f"  {where}:")
        lines += [f"    {n}" for n in names]
    return "\n".join(lines)


def run_study(name: str, rest: list[str]) -> int:
    """Runs study ``name`` from whichever study module has it, passing ``rest`` on."""
    if "--update-committed" in rest:
        rest = [a for a in rest if a != "--update-committed"]
        # Every study's committed results live in one folder, which the README links.
        rest += ["--out", str(_paths.COMMITTED / "studies")]
    for module in STUDY_MODULES:
        names, present = _study_names(module)
        if name in names:
            if not present:
                print(
                    f"python -m benchmarks study {name}: the study is defined in "
                    f"benchmarks/{module}.py, which is not in this checkout; nothing was run.",
                    file=sys.stderr,
                )
                return 2
            return _delegate(module, [name, *rest], "study")
    print(
        f"python -m benchmarks study: unknown study {name!r}.\n\n{_study_help()}", file=sys.stderr
    )
    return 2


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: ``python -m benchmarks [COMMAND] ...``."""
    from . import _suite, bench_crossover, pricing, tuning

    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="jaxdp's benchmarks: throughput against peer libraries, the Gumbel / "
        "inverse-CDF crossover, and accuracy studies. With no COMMAND, runs `suite`.",
        epilog="Results go to ./jaxdp-results/ under the current directory (or --out DIR). "
        "Run `python -m benchmarks COMMAND --help` for a command's options.",
        formatter_class=raw,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    suite = sub.add_parser(
        "suite",
        help="throughput of every sampler against its peers (the default)",
        description=_suite.__doc__,
        formatter_class=raw,
    )
    _suite.add_arguments(suite)
    suite.set_defaults(func=_suite.run)
    cross = sub.add_parser(
        "crossover",
        help="where Gumbel-max beats the inverse CDF (the `auto` rule)",
        description=bench_crossover.__doc__,
        formatter_class=raw,
    )
    bench_crossover.add_arguments(cross)
    cross.set_defaults(func=bench_crossover.run)
    tune = sub.add_parser(
        "tuning",
        help="the measurements behind jaxdp._tuning's constants (chunks, the alias rule, "
        "the tabulated noisy max's cost model)",
        description=tuning.__doc__,
        formatter_class=raw,
    )
    tuning.add_arguments(tune)
    tune.set_defaults(func=tuning.run)
    price = sub.add_parser(
        "pricing",
        help="exact continuous pricing and quantiles against their laws and a grid",
        description=pricing.__doc__,
        formatter_class=raw,
    )
    pricing.add_arguments(price)
    price.set_defaults(func=lambda args: pricing.run(args) and 0)
    study = sub.add_parser(
        "study",
        help="an accuracy study by name (Monte Carlo, selection)",
        description="Runs one accuracy study; the options after NAME go to the study.",
        epilog=_study_help(),
        formatter_class=raw,
    )
    study.add_argument("name", metavar="NAME", help="the study to run (listed below)")
    study.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="the study's own options, e.g. --out DIR, --scale S, --update-committed",
    )
    study.set_defaults(func=lambda args: run_study(args.name, list(args.args)))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["suite", *argv]  # the default subcommand
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
