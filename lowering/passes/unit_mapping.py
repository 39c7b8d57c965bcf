"""Unit mapping: which PE unit executes each op (for the tile-stage listing and reports).

dot -> dot-product engine; elementwise/math -> SIMD engine; reduce/scan -> reduction engine;
layout ops -> memory-layout unit (or a free view); loads/stores/atomics -> DMA (block or
gather/scatter), except atomics with unused results that become RED_ACCUMULATE (reduction
network); scalar ops and structured control flow -> the RISC-V control core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lowering.analysis.accumulate import accumulate_form
from lowering.ir.core import Operation
from lowering.ir.module import Module
from lowering.passes.manager import Pass, PassContext, search_field
from lowering.passes.pointer_analysis import PointerInfo

_UNIT_BY_PREFIX: tuple[tuple[str, str], ...] = (
    ("tt.dot", "DPE"),
    ("tt.reduce", "RED"),
    ("tt.scan", "RED"),
    ("tt.trans", "view"),
    ("tt.broadcast", "view"),
    ("tt.expand_dims", "view"),
    ("tt.splat", "view"),
    ("tt.reshape", "view|MLU"),
    ("tt.join", "MLU"),
    ("tt.split", "view"),
    ("tt.cat", "MLU"),
    ("tt.atomic", "DMA(atomic)"),
    ("tt.make_range", "SIMD"),
    ("tt.addptr", "SIMD"),
    ("arith.", "SIMD"),
    ("math.", "SIMD"),
    ("tt.", "SIMD"),
)


def unit_of(op: Operation, pointers: PointerInfo, accumulate: bool = True) -> str:
    """The unit for `op` ("core" for scalar work and control flow)."""
    if op.name.startswith("tt.atomic"):
        if accumulate_form(op) is not None and (
            pointers.access(op) is not None or (accumulate and not op.operands[0].type.is_tensor)
        ):
            return "RED(accumulate)"
        return "DMA(atomic)"
    if op.name.startswith("scf.") or op.name in ("tt.return", "tt.get_program_id", "tt.get_num_programs"):
        return "core"
    if op.name in ("tt.load", "tt.store"):
        if not op.operands[0].type.is_tensor:
            return "core"
        return (
            "DMA(block)"
            if pointers.access(op) is not None
            else "DMA(row gather)"
            if pointers.row_access(op) is not None
            else "DMA(gather)"
            if op.name == "tt.load"
            else "DMA(scatter)"
        )
    tensor = any(r.type.is_tensor for r in op.results) or any(v.type.is_tensor for v in op.operands)
    if not tensor:
        return "core"
    if (
        op.results
        and all(r.type.is_tensor for r in op.results)
        and not any(pointers.needs_buffer(r) for r in op.results)
    ):
        return "none(address)"
    if op.name == "arith.constant":
        return "imm"
    for prefix, unit in _UNIT_BY_PREFIX:
        if op.name.startswith(prefix):
            return unit
    return "SIMD"


@dataclass(frozen=True)
class UnitMapping(Pass):
    """Pass (analysis): the unit that runs each op (result: id(op) -> unit name). With
    `red_accumulate`, atomics with unused results may go to RED_ACCUMULATE."""

    name: ClassVar[str] = "unit-mapping"
    requires: ClassVar[tuple[str, ...]] = ("pointer-analysis",)
    analysis: ClassVar[bool] = True
    red_accumulate: bool = search_field(True, (True, False))

    def apply(self, module: Module, ctx: PassContext) -> None:
        pointers = ctx.result("pointer-analysis")
        units = {id(op): unit_of(op, pointers, self.red_accumulate) for op in ctx.kernel.walk()}
        ctx.results[self.name] = units
