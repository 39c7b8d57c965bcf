"""Multi-buffering of loads in loops: each block load directly inside an `scf.for` body rotates
through `num_stages` local-store buffers, so the DMA of iteration i+1 can run while the units
compute on iteration i (the command processor only orders a DMA behind the readers of the
buffer it overwrites). A loop's own `tt.num_stages` attribute (from `tl.range(num_stages=)`)
overrides the option."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lowering.ir.module import Function, Module
from lowering.passes.manager import Pass, PassContext, search_field
from lowering.passes.pointer_analysis import PointerInfo


@dataclass(frozen=True)
class MultiBuffering(Pass):
    """Pass (analysis): ring depth for each block load in a loop (result: id(load) -> depth;
    `num_stages` >= 1, 1 = single buffer)."""

    name: ClassVar[str] = "multi-buffering"
    requires: ClassVar[tuple[str, ...]] = ("pointer-analysis",)
    analysis: ClassVar[bool] = True
    num_stages: int = search_field(1, (1, 2, 3))

    def __post_init__(self) -> None:
        if self.num_stages < 1:
            raise ValueError(f"num_stages must be >= 1, got {self.num_stages}")

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = ring_depths(ctx.kernel, ctx.result("pointer-analysis"), self.num_stages)


def ring_depths(fn: Function, pointers: PointerInfo, num_stages: int) -> dict[int, int]:
    """id(load) -> ring depth for the block loads directly inside `scf.for` bodies."""
    stages: dict[int, int] = {}
    for op in fn.walk():
        if op.name != "scf.for":
            continue
        depth = int(op.attr("tt.num_stages", num_stages) or num_stages)
        if depth <= 1:
            continue
        for inner in op.regions[0].entry.ops:
            if inner.name == "tt.load" and inner.results[0].type.is_tensor and pointers.access(inner):
                stages[id(inner)] = depth
    return stages
