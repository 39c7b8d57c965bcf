"""Render the generated parts of `knowledge/hardware/mtia/*.md` from the simulator's own definitions.

Generated blocks sit between marker comments in the markdown:

    <!-- generated:begin NAME -->
    ...text rendered by RENDERERS[NAME]...
    <!-- generated:end NAME -->

Their sources are `mtia_sim/isa.py` (memory map, registers, ABI, commands: `mtia_isa_tables`) and
the machine descriptions (`mtia_sim/machine.py`, `mtia_sim/machines/*.toml`: `mtia_machine_tables`,
`mtia_costs`), so the documents cannot drift
from the simulator: `python -m kegen.knowledge.mtia_docs --write` rewrites the blocks, `--check`
(and the test suite) fails when the checked-in text differs from the rendering.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from kegen.knowledge.mtia_costs import CostExample, command_cycles, cost_examples, render_cost_model
from kegen.knowledge.mtia_figures import hand_written_figures, missing_figures
from kegen.knowledge.mtia_format import DEFAULT_MACHINE
from kegen.knowledge.mtia_isa_tables import (
    render_abi,
    render_commands,
    render_compiler_options,
    render_descriptor,
    render_dtypes,
    render_errors,
    render_memory_map,
    render_registers,
    render_simd_ops,
)
from kegen.knowledge.mtia_machine_tables import render_derived_numbers, render_machine_table

_BLOCK = re.compile(
    r"(<!-- generated:begin (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- generated:end (?P=name) -->)",
    re.DOTALL,
)

__all__ = [
    "DEFAULT_MACHINE", "RENDERERS", "CostExample", "block_names", "command_cycles", "cost_examples",
    "docs_dir", "hand_written_figures", "main", "missing_figures", "render_abi", "render_commands",
    "render_compiler_options", "render_cost_model", "render_derived_numbers", "render_descriptor",
    "render_document", "render_dtypes", "render_errors", "render_machine_table", "render_memory_map",
    "render_registers", "render_simd_ops", "stale_documents", "write_documents",
]


RENDERERS: dict[str, Callable[[], str]] = {
    "cost-model": render_cost_model,
    "errors": render_errors,
    "compiler-options": render_compiler_options,
    "machine-table": render_machine_table,
    "derived-numbers": render_derived_numbers,
    "memory-map": render_memory_map,
    "registers": render_registers,
    "commands": render_commands,
    "simd-ops": render_simd_ops,
    "dtypes": render_dtypes,
    "descriptor": render_descriptor,
    "abi": render_abi,
}


# ---------------------------------------------------------------------------------------------
# Rewriting and checking documents
# ---------------------------------------------------------------------------------------------
def docs_dir() -> Path:
    from kegen.knowledge.store import shipped_root

    return shipped_root() / "hardware" / "mtia"


def block_names(text: str) -> list[str]:
    return [m["name"] for m in _BLOCK.finditer(text)]


def render_document(text: str) -> str:
    """`text` with every generated block replaced by its current rendering."""

    def replace(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in RENDERERS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(RENDERERS)}")
        return m.group(1) + RENDERERS[name]() + m.group(4)

    return _BLOCK.sub(replace, text)


def stale_documents(folder: Path | None = None) -> list[Path]:
    """Documents under `folder` whose generated blocks differ from the rendering."""
    folder = folder or docs_dir()
    return [
        p
        for p in sorted(folder.glob("*.md"))
        if render_document(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")
    ]


def write_documents(folder: Path | None = None) -> list[Path]:
    """Rewrite the generated blocks in place; returns the files that changed."""
    changed = []
    for path in stale_documents(folder):
        path.write_text(render_document(path.read_text(encoding="utf-8")), encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kegen.knowledge.mtia_docs", description=__doc__.split("\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if any generated block is out of date")
    mode.add_argument("--render", metavar="BLOCK", choices=sorted(RENDERERS), help="print one block")
    args = parser.parse_args(argv)
    if args.render:
        print(RENDERERS[args.render](), end="")
        return 0
    if args.write:
        for path in write_documents():
            print(f"rewrote {path}")
        return 0
    stale = stale_documents()
    for path in stale:
        print(
            f"{path}: generated blocks are out of date; run `python -m kegen.knowledge.mtia_docs --write`",
            file=sys.stderr,
        )
    missing = missing_figures()
    for line in missing:
        print(
            f"hand-written figure no longer matches the machine description, update the prose: {line}",
            file=sys.stderr,
        )
    return 1 if stale or missing else 0


if __name__ == "__main__":
    sys.exit(main())
