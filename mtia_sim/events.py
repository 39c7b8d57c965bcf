"""Events from the functional model to the timing model.

The functional model (Unicorn cores + numpy units) runs each program to completion and records,
per program, what it did in order: instructions retired on the core between commands, each command
with the facts the timing model needs (never its values), fences, and the end. The timing model
(`mtia_sim.timing`) replays the programs of all PEs together and owns every cycle and counter, so
results can never depend on timing parameters.

Events are read-only records: the core hands out one shared object for every replay of the same
command at the same pc (and one CoreEvent per instruction count), so nothing may mutate them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

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


@dataclass(frozen=True)
class MemSpan:
    """Where a command's DRAM or SRAM bytes lie (device addresses), for the memory-side cache model.

    Rows of `row_bytes` contiguous bytes start at `base + sum(i_k * strides[k])` for every index
    `i_k < counts[k]`, or at each address of `starts` when it is given (gathers, scatters, masked
    copies). Only the timing model reads it.
    """

    level: MemLevel
    write: bool
    base: int
    row_bytes: int
    counts: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    starts: Any = None  # numpy int64 array of row start addresses, or None

    @classmethod
    def strided(cls, level: MemLevel, write: bool, addr: int, shape: tuple[int, ...],
                elem_strides: list[int] | tuple[int, ...], itemsize: int) -> MemSpan:
        """The bytes of a strided view (element strides) as rows, innermost contiguous dims merged."""
        dims = []
        for n, s in zip(shape, elem_strides, strict=False):
            if n > 1 and s:
                b = s * itemsize
                if b < 0:  # same bytes as the positive stride from the other end
                    addr += (n - 1) * b
                    b = -b
                dims.append((b, n))
        dims.sort(reverse=True)
        row = itemsize
        while dims and dims[-1][0] == row:
            row *= dims.pop()[1]
        return cls(level, write, addr, row, tuple(n for _, n in dims), tuple(b for b, _ in dims))

    def row_starts(self) -> np.ndarray:
        """Start address of every row (int64)."""
        if self.starts is not None:
            return np.asarray(self.starts, dtype=np.int64)
        out = np.full(1, self.base, dtype=np.int64)
        for n, b in zip(self.counts, self.strides, strict=True):
            out = (out[:, None] + np.arange(n, dtype=np.int64) * b).reshape(-1)
        return out


@dataclass
class CoreEvent:
    """`instructions` retired on the control core since the previous event.

    `mem_accesses` lists the scalar loads and stores those instructions made outside the core's
    own stack and local store, one `(level, accesses, bytes)` per level touched, level "dram" or
    "sram" (a MemLevel value); empty when the segment only used registers, stack and local store.
    """

    instructions: int
    mem_accesses: tuple[tuple[str, int, int], ...] = ()


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
    spans: list[MemSpan] = field(default_factory=list)  # DRAM/SRAM bytes touched (for the SRAM cache)


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
