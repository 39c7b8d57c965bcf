"""Program-id → PE mapping of the launch grid.

"round_robin": one program per grid point; the simulator deals program i to slot i mod
(PEs x cores), PE-major. "blocked": one program per core; program p runs the kernel body for the
consecutive program ids p*k .. p*k+k-1 (k = ceil(grid_x / cores)), so fewer programs are
launched and each PE streams through neighbouring blocks. The kernel reads k and the real grid
size from two extra argument slots; `tl.program_id(0)` / `tl.num_programs(0)` keep their meaning.
`dual_core` doubles the cores (both cores of every PE run programs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lowering.ir.module import Module
from lowering.passes.manager import Pass, PassContext, search_field

PE_MAPPINGS = ("round_robin", "blocked")


@dataclass(frozen=True)
class LaunchPlan:
    grid: tuple[int, int, int]
    extra_slots: tuple[int, ...]
    programs_per_core: int


@dataclass(frozen=True)
class PEMapping(Pass):
    """Pass (launch side): how a grid becomes programs on the PE grid. Over the IR it only records
    itself (result: this pass), since codegen reads the mapping; `plan` is used at launch."""

    name: ClassVar[str] = "pe-mapping"
    analysis: ClassVar[bool] = True
    pe_mapping: str = search_field("round_robin", PE_MAPPINGS)
    dual_core: bool = search_field(False, (False, True))

    def __post_init__(self) -> None:
        if self.pe_mapping not in PE_MAPPINGS:
            raise ValueError(f"pe_mapping must be one of {PE_MAPPINGS}, got {self.pe_mapping!r}")

    @property
    def mapping(self) -> str:
        return self.pe_mapping

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = self

    def plan(self, grid: tuple[int, int, int], num_pes: int, cores_per_pe: int) -> LaunchPlan:
        """The grid actually launched and the extra ABI slots the kernel expects."""
        if self.mapping == "round_robin":
            return LaunchPlan(grid, (), 1)
        cores = num_pes * (cores_per_pe if self.dual_core else 1)
        k = max(1, -(-grid[0] // cores))
        return LaunchPlan((-(-grid[0] // k), grid[1], grid[2]), (k, grid[0]), k)
