"""Multi-buffering of loads in loops: each block load directly inside an `scf.for` body rotates
through `num_stages` local-store buffers, so the DMA of iteration i+1 can run while the units
compute on iteration i (the command processor only orders a DMA behind the readers of the
buffer it overwrites). A loop's own `tt.num_stages` attribute (from `tl.range(num_stages=)`)
overrides the option."""

from __future__ import annotations

from lowering.ir.module import Function
from lowering.passes.pointer_analysis import PointerInfo


class MultiBuffering:
    """Pass: ring depth for each load in a loop (`num_stages` >= 1; 1 = single buffer)."""

    name = "multi-buffering"

    def __init__(self, num_stages: int = 1) -> None:
        if num_stages < 1:
            raise ValueError(f"num_stages must be >= 1, got {num_stages}")
        self.num_stages = num_stages

    @staticmethod
    def search_space() -> dict[str, tuple[int, ...]]:
        return {"num_stages": (1, 2, 3)}

    def apply(self, fn: Function, pointers: PointerInfo) -> dict[int, int]:
        stages: dict[int, int] = {}
        for op in fn.walk():
            if op.name != "scf.for":
                continue
            depth = int(op.attr("tt.num_stages", self.num_stages) or self.num_stages)
            if depth <= 1:
                continue
            for inner in op.regions[0].entry.ops:
                if inner.name == "tt.load" and inner.results[0].type.is_tensor and pointers.access(inner):
                    stages[id(inner)] = depth
        return stages
