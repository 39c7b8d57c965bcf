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

from lowering.backend.options import PE_MAPPINGS


@dataclass(frozen=True)
class LaunchPlan:
    grid: tuple[int, int, int]
    extra_slots: tuple[int, ...]
    programs_per_core: int


class PEMapping:
    """Pass (launch side): how a grid becomes programs on the PE grid."""

    name = "pe-mapping"

    def __init__(self, mapping: str = "round_robin", dual_core: bool = False) -> None:
        if mapping not in PE_MAPPINGS:
            raise ValueError(f"pe_mapping must be one of {PE_MAPPINGS}, got {mapping!r}")
        self.mapping = mapping
        self.dual_core = dual_core

    @staticmethod
    def search_space() -> dict[str, tuple[object, ...]]:
        return {"pe_mapping": PE_MAPPINGS, "dual_core": (False, True)}

    def plan(self, grid: tuple[int, int, int], num_pes: int, cores_per_pe: int) -> LaunchPlan:
        """The grid actually launched and the extra ABI slots the kernel expects."""
        if self.mapping == "round_robin":
            return LaunchPlan(grid, (), 1)
        cores = num_pes * (cores_per_pe if self.dual_core else 1)
        k = max(1, -(-grid[0] // cores))
        return LaunchPlan((-(-grid[0] // k), grid[1], grid[2]), (k, grid[0]), k)
