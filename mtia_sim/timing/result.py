"""What a timing run produces: the schedule of every command and program, and the counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mtia_sim.events import CommandEvent
from mtia_sim.isa import Unit
from mtia_sim.machine import MachineDescription
from mtia_sim.timing.sram_cache import CacheStats, Routed

if TYPE_CHECKING:
    from mtia_sim.counters import Counters


@dataclass(slots=True)
class CommandRecord:
    """One command's schedule (cycles from kernel start) and why it waited."""

    pe: int
    core: int
    program: int  # index into the traces given to simulate()
    event: CommandEvent
    issue: float  # the core wrote the doorbell
    start: float  # the unit began it
    end: float
    wait_unit: float = 0.0  # issue -> head of a free unit (earlier commands in the unit's queue)
    wait_dependency: float = 0.0  # head of a free unit -> start (local-store RAW/WAR/WAW)
    wait_bandwidth: float = 0.0  # transfer slower than alone, because bandwidth was shared
    ideal_cycles: float = 0.0  # throughput-bound compute cycles (for peaks and the roofline)
    slot: int = 0  # which of the unit's in-flight slots ran it (DMA may have several)
    routed: Routed | None = None  # its DRAM bytes split by the SRAM cache (None: as the event says)

    @property
    def bytes_read(self) -> dict:
        """Bytes read per memory level as served (DRAM hits in the SRAM cache count as SRAM)."""
        return self.event.bytes_read if self.routed is None else self.routed.read

    @property
    def bytes_written(self) -> dict:
        """Bytes written per memory level as served (see `bytes_read`)."""
        return self.event.bytes_written if self.routed is None else self.routed.written

    @property
    def unit(self) -> Unit:
        return self.event.unit

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(slots=True)
class ProgramRecord:
    """One program's run on a core: when it started and ended, what the core did and waited for."""

    program: int  # index into the traces given to simulate()
    program_id: tuple[int, int, int]
    pe: int
    core: int
    start: float
    end: float = 0.0
    instructions: int = 0
    busy_cycles: float = 0.0  # executing instructions and issuing commands
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> cycles the core waited
    mem_accesses: int = 0  # scalar loads/stores to DRAM or SRAM
    mem_bytes: dict[str, int] = field(default_factory=dict)  # their bytes per level ("dram", "sram")

    @property
    def cycles(self) -> float:
        return self.end - self.start

    @property
    def accounted_cycles(self) -> float:
        """busy + every stall: equals `cycles` (every cycle of a program is named)."""
        return self.busy_cycles + sum(self.stalls.values())


Records = list[CommandRecord] | Callable[[], list[CommandRecord]]
Timeline = list[tuple[float, float, float]]


@dataclass(init=False)
class TimingResult:
    """Cycles and counters of one launch. Command/program times are cycles from kernel start.

    `commands`, `programs`, `counters` and `bandwidth_timeline` may be given as functions that build
    them: they are then built on first access (timing a call needs only the cycles).
    """

    machine: MachineDescription
    kernel_cycles: float  # makespan of all programs
    launch_cycles: float  # launch overhead (0 with launch_overhead=False) + resident SRAM placement (D22)
    events_processed: int = 0  # timing-model events (for measuring the model's own speed)
    sram_cache: CacheStats | None = None  # what the SRAM cache did

    def __init__(self, machine: MachineDescription, kernel_cycles: float, launch_cycles: float,
                 commands: Records, programs: list[ProgramRecord] | Callable[[], list[ProgramRecord]],
                 counters: Counters | Callable[[], Counters], events_processed: int = 0,
                 bandwidth_timeline: Timeline | Callable[[], Timeline] | None = None,
                 sram_cache: CacheStats | None = None) -> None:
        self.machine = machine
        self.kernel_cycles = kernel_cycles
        self.launch_cycles = launch_cycles
        self._commands = commands
        self._programs = programs
        self._counters = counters
        self.events_processed = events_processed
        self._timeline = [] if bandwidth_timeline is None else bandwidth_timeline
        self.sram_cache = sram_cache

    @property
    def commands(self) -> list[CommandRecord]:
        """Every command's schedule, in issue order."""
        if callable(self._commands):
            self._commands = self._commands()
        return self._commands

    @property
    def counters(self) -> Counters:
        """Per-PE, per-unit and chip-wide counters (mtia_sim.counters)."""
        if callable(self._counters):
            self._counters = self._counters()
        return self._counters

    @property
    def bandwidth_timeline(self) -> Timeline:
        """(cycle, DRAM bytes/cycle, SRAM bytes/cycle) in flight from that cycle on (step function)."""
        if callable(self._timeline):
            self._timeline = self._timeline()
        return self._timeline

    @property
    def programs(self) -> list[ProgramRecord]:
        """Every program's run, in the order the cores started them."""
        if callable(self._programs):
            self._programs = self._programs()
        return self._programs

    @property
    def cycles(self) -> float:
        """Total launch time in cycles: launch overhead + makespan."""
        return self.launch_cycles + self.kernel_cycles

    @property
    def seconds(self) -> float:
        return self.machine.cycles_to_seconds(self.cycles)

    @property
    def kernel_seconds(self) -> float:
        return self.machine.cycles_to_seconds(self.kernel_cycles)


def as_timing_result(result: object) -> TimingResult:
    """A TimingResult, also from an object that carries one as `.timing` (the simulator's LaunchResult)."""
    if isinstance(result, TimingResult):
        return result
    inner = getattr(result, "timing", None)
    if isinstance(inner, TimingResult):
        return inner
    raise TypeError(f"expected a mtia_sim.timing.TimingResult (or a launch result holding one), "
                    f"got {type(result).__name__}")
