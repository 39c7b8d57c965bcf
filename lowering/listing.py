"""Text of the tile stage: the tile IR (parses back with `lowering.ttir.parser.parse_ttir`) followed
by the analyses' findings as `//` comments (unit, block access and ring depth of each op), which the
parser skips. The comments are derived: the `llir` stage re-runs the analyses on the IR it parses.
"""

from __future__ import annotations

from typing import Any

from lowering.ir.module import Function, Module
from lowering.passes.manager import PassContext

__all__ = ["tile_text", "analysis_comments", "LISTING_HEADER"]

ANALYSES = ("pointer-analysis", "multi-buffering", "unit-mapping")
LISTING_HEADER = "// ---- analyses (derived; the llir stage recomputes them from the IR above) ----"


def tile_text(module: Module, ctx: PassContext | None = None) -> str:
    """The module with locations, then (when `ctx` holds the analyses) their findings as comments."""
    from lowering.ir.printer import print_module

    text = print_module(module, locations=True)
    if ctx is not None and any(k in ctx.results for k in ANALYSES):
        text += "\n".join(["", LISTING_HEADER, *analysis_comments(ctx.kernel, ctx)]) + "\n"
    return text


def analysis_comments(fn: Function, ctx: PassContext) -> list[str]:
    """One `//` line per op of `fn`: its results, name, unit, block access and ring depth."""
    from lowering.ir.printer import Printer

    units: dict[int, str] = ctx.results.get("unit-mapping", {})
    pointers = ctx.results.get("pointer-analysis")
    stages: dict[int, int] = ctx.results.get("multi-buffering", {})
    lines = [f"// kernel {fn.name}: units per op"]
    printer = Printer()
    for a in fn.args:
        printer.define(a)

    def name(v: Any) -> str:
        n = printer.names.get(id(v))
        return "%" + n if n is not None else "%?"

    def walk(ops: list[Any], depth: int) -> None:
        for op in ops:
            res = ", ".join(printer.define(r) for r in op.results)
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.args:
                        printer.define(arg)
            text = f"//{'  ' * (depth + 1)}{res + ' = ' if res else ''}{op.name} -> {units.get(id(op), '?')}"
            acc = pointers.access(op) if pointers is not None else None
            row = pointers.row_access(op) if pointers is not None else None
            if acc is not None:
                text += " " + acc.describe().replace("%?", name(acc.base))
            elif row is not None:
                text += " " + row.describe(name)
            if id(op) in stages:
                text += f" stages={stages[id(op)]}"
            lines.append(text)
            for region in op.regions:
                for block in region.blocks:
                    walk(block.ops, depth + 1)

    for i, block in enumerate(fn.body.blocks):
        if i:
            args = ", ".join(printer.define(a) for a in block.args)
            lines.append(f"// ^bb{i}({args}):" if args else f"// ^bb{i}:")
        walk(block.ops, 0)
    return lines
