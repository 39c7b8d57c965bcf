"""Events from the functional model to the timing model.

The functional model (Unicorn cores + numpy units) runs each program to completion and records,
per program, what it did in order: instructions retired on the core between commands, each command
with the facts the timing model needs (never its values), fences, and the end. The timing model
(`mtia_sim.timing`) replays the programs of all PEs together and owns every cycle and counter, so
results can never depend on timing parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from mtia_sim.isa import Op, Unit


class MemLevel(StrEnum):
    """Where bytes live."""

    LOCAL = "local"  # this PE's local store
    REMOTE_LOCAL = "remote_local"  # another PE's local store, over the NoC
    SRAM = "sram"
    DRAM = "dram"


@dataclass(frozen=True)
class AddrRange:
    """A half-open byte range [start, end) of absolute addresses in the PE's local store window
    (starting at isa.LOCAL_BASE), used by the command processor for dependency tracking."""

    start: int
    end: int

    def overlaps(self, other: AddrRange) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass
class CoreEvent:
    """`instructions` retired on the control core since the previous event."""

    instructions: int


@dataclass
class CommandEvent:
    """One command as the timing model sees it."""

    op: Op
    unit: Unit
    subop: int
    elements: int  # size of the command's index space
    flops: int = 0  # arithmetic operations (a multiply-add counts 2)
    bytes_read: dict[MemLevel, int] = field(default_factory=dict)
    bytes_written: dict[MemLevel, int] = field(default_factory=dict)
    reads: list[AddrRange] = field(default_factory=list)  # local-store ranges read
    writes: list[AddrRange] = field(default_factory=list)  # local-store ranges written
    dtype_bytes: int = 4  # itemsize of the main operand (DPE/SIMD throughput depends on it)
    misaligned: bool = False  # a DMA operand not on isa.ALIGNMENT
    remote_pe: int | None = None  # for REMOTE_LOCAL: the other PE
    matmul_mnk: tuple[int, int, int] | None = None  # DPE only
    transcendental: bool = False  # SIMD ops evaluated through lookup tables
    tag: int = 0  # compiler's source-location id
    pc: int = 0  # core PC of the doorbell store


@dataclass
class FenceEvent:
    """The core waits until every unit in `unit_mask` is idle."""

    unit_mask: int
    pc: int = 0


@dataclass
class EndEvent:
    """The program returned (the core waits for all units)."""


Event = CoreEvent | CommandEvent | FenceEvent | EndEvent


@dataclass
class ProgramTrace:
    """Everything one program (one grid point) did, in order, and where it ran."""

    program_id: tuple[int, int, int]
    pe: int
    core: int
    events: list[Event] = field(default_factory=list)

    @property
    def instructions(self) -> int:
        return sum(e.instructions for e in self.events if isinstance(e, CoreEvent))
