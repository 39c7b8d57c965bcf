"""The `kegen` command line: one subcommand per module in `kegen.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from kegen import __version__

# name -> one line of help. Each subcommand lives in kegen/commands/<name>.py and provides
# `add_arguments(parser)` and `run(args) -> int`.
SUBCOMMANDS: dict[str, str] = {
    "lower": "compile a Triton kernel for mtia, nvidia or amd; print any stage (ttir, tile, llir, ptx)",
    "run": "run a candidate once on the problem's inputs and print outputs and time",
    "profile": "run a candidate under the profiler and print the per-unit profile (and a trace)",
    "eval": "check a candidate against its PyTorch reference, time it and report speedups",
    "evolve": "search for a faster kernel for a problem (tree search with an LLM or offline operator)",
    "bench": "evaluate and search every problem of a suite and report pass rate and speedups",
    "report": "render a search run: fitness over time, search tree, best kernel's profile",
    "kb": "browse and extend the hardware knowledge base (list, show, search, add)",
    "tune": "tune a whole model: hot kernels searched, winners installed, verified at every input variant",
}

EXIT_NOT_BUILT = 2


def _load_command(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"kegen.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"kegen.commands.{name}":
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kegen",
        description="kegen: find fast, correct accelerator kernels by search; "
        "with a simulated MTIA target that needs no hardware.",
    )
    parser.add_argument("--version", action="version", version=f"kegen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = _load_command(name)
        if module is not None and hasattr(module, "add_arguments"):
            module.add_arguments(p)
        else:
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kegen` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_NOT_BUILT
    module = _load_command(args.command)
    if module is None or not hasattr(module, "run"):
        print(f"kegen {args.command}: not built yet in this version ({__version__}).", file=sys.stderr)
        return EXIT_NOT_BUILT
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
