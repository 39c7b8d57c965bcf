"""The state objects of the timing replay (`engine.Replay`): commands, unit queues, PEs, cores and
scalar accesses in flight. Plain slotted classes; the replay's logic is all in `engine`."""

from __future__ import annotations

from collections import deque

from mtia_sim.events import MemLevel
from mtia_sim.isa import Unit
from mtia_sim.timing.result import CommandRecord, ProgramRecord

UNITS = (Unit.DMA, Unit.DPE, Unit.SIMD, Unit.RED, Unit.MLU)  # the units that take commands, in track order


class ScalarAccess:
    """A core's scalar loads/stores of one trace segment, in flight on the shared memories."""

    __slots__ = ("core", "level", "traffic")

    def __init__(self, core: CoreState, level: MemLevel, traffic: float) -> None:
        self.core = core
        self.level = level
        self.traffic = traffic


class Cmd:
    """A command in the replay: its record, local-store ranges, scoreboard links and transfer state."""

    __slots__ = ("rec", "reads", "writes", "unit", "lo", "hi", "deps_left", "dependents", "waiters", "done",
                 "head_at", "transfer_start", "transfer_alone", "merge_left", "merged")

    def __init__(self, rec: CommandRecord) -> None:
        self.rec = rec
        ev = rec.event
        self.unit = ev.unit
        self.reads = ev.reads
        self.writes = ev.writes
        self.lo = self.hi = 0  # bounding range of its local-store ranges (set by Replay._issue)
        self.deps_left = 0
        self.dependents: list[Cmd] = []
        self.waiters: list[CoreState] = []
        self.done = False
        self.head_at: float | None = None
        self.transfer_start = 0.0
        self.transfer_alone = 0.0
        self.merge_left = 0  # fills in flight this command's merged misses still wait for
        self.merged: list[Cmd] = []  # commands whose misses merged with this command's fill

    def conflicts(self, other: Cmd) -> bool:
        """RAW, WAR or WAW on local-store ranges with an earlier command."""
        for w in self.writes:
            for r in other.reads:
                if w.start < r.end and r.start < w.end:
                    return True
            for r in other.writes:
                if w.start < r.end and r.start < w.end:
                    return True
        for r in self.reads:
            for w in other.writes:
                if w.start < r.end and r.start < w.end:
                    return True
        return False


class UnitQueue:
    """A unit's in-order queue and its in-flight slots (1, or dma_max_in_flight for DMA)."""

    __slots__ = ("queue", "running", "blocked_cores")

    def __init__(self, slots: int) -> None:
        self.queue: deque[Cmd] = deque()
        self.running: list[Cmd | None] = [None] * slots
        self.blocked_cores: list[CoreState] = []


class PEState:
    """A PE's unit queues and its command processor's scoreboard."""

    __slots__ = ("units", "outstanding")

    def __init__(self, dma_slots: int) -> None:
        self.units = {u: UnitQueue(dma_slots if u == Unit.DMA else 1) for u in UNITS}
        self.outstanding: list[Cmd] = []  # the command processor's scoreboard


class CoreState:
    """A control core in the replay: its programs, position in the current trace, time and stalls."""

    __slots__ = ("pe", "core", "programs", "prog", "events", "idx", "time", "paid", "issued",
                 "waiting", "blocked", "blocked_since", "wake_unit", "pending_mem")

    def __init__(self, pe: int, core: int, programs: list[int]) -> None:
        self.pe = pe
        self.core = core
        self.programs = deque(programs)
        self.prog: ProgramRecord | None = None
        self.events: list = []
        self.idx = 0
        self.time = 0.0
        self.paid = False  # the current command's issue cost is already counted
        self.issued: dict[Unit, list[Cmd]] = {}  # this program's commands per unit (done ones pruned)
        self.waiting: set[Cmd] = set()
        self.blocked: str | None = None
        self.pending_mem: list[tuple[str, int, int]] = []  # scalar accesses still to make
        self.blocked_since = 0.0
        self.wake_unit: Unit | None = None
