"""Per-PE, per-unit and chip-wide counters of a timing run, and the roofline position.

Built from the timing model's schedule (`mtia_sim.timing`); every figure is derived from command
and program records, so the counters always add up to the schedule. `Counters.to_dict()` is plain
JSON whose keys are declared, with unit and meaning, in `mtia_sim.stats` (LAUNCH, UNIT, BANDWIDTH,
ROOFLINE; stall reasons in STALLS).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mtia_sim.events import MemLevel
from mtia_sim.isa import Unit
from mtia_sim.machine import MachineDescription
from mtia_sim.stats import WAIT_BANDWIDTH, WAIT_DEPENDENCY, WAIT_UNIT

if TYPE_CHECKING:  # records import nothing from here, but mtia_sim.timing imports this module
    from mtia_sim.timing.result import CommandRecord, ProgramRecord

UNIT_NAMES = tuple(u.name for u in Unit)  # CORE, DMA, DPE, SIMD, RED, MLU
LEVELS = tuple(level.value for level in MemLevel)
_LEVEL_KEY = {level: level.value for level in MemLevel}  # MemLevel (or its string) -> plain str key


def _add(table: dict[str, Any], key: str, value: float) -> None:
    if value:
        table[key] = table.get(key, 0) + value


@dataclass
class UnitCounters:
    """What one unit (or the sum of that unit over several PEs) did."""

    unit: str
    busy_cycles: float = 0.0
    commands: int = 0
    flops: int = 0
    elements: int = 0
    ideal_cycles: float = 0.0  # throughput-bound cycles of its FLOP-carrying commands
    bytes_read: dict[str, int] = field(default_factory=dict)
    bytes_written: dict[str, int] = field(default_factory=dict)
    stall_cycles: dict[str, float] = field(default_factory=dict)

    def add(self, other: UnitCounters) -> None:
        self.busy_cycles += other.busy_cycles
        self.commands += other.commands
        self.flops += other.flops
        self.elements += other.elements
        self.ideal_cycles += other.ideal_cycles
        for mine, theirs in ((self.bytes_read, other.bytes_read), (self.bytes_written, other.bytes_written),
                             (self.stall_cycles, other.stall_cycles)):
            for k, v in theirs.items():
                _add(mine, k, v)

    @property
    def bytes_total(self) -> int:
        return sum(self.bytes_read.values()) + sum(self.bytes_written.values())

    @property
    def stall_total(self) -> float:
        return sum(self.stall_cycles.values())

    def peak_flops_per_cycle(self) -> float | None:
        """The unit's throughput for its own mix of commands (FLOPs per busy-at-peak cycle)."""
        return self.flops / self.ideal_cycles if self.ideal_cycles > 0 else None

    def to_dict(self, kernel_cycles: float, lanes: int, clock_hz: float) -> dict[str, Any]:
        seconds = kernel_cycles / clock_hz if kernel_cycles > 0 else 0.0
        peak = self.peak_flops_per_cycle()
        return {
            "unit": self.unit,
            "busy_cycles": self.busy_cycles,
            "utilization": self.busy_cycles / (kernel_cycles * lanes) if kernel_cycles > 0 else 0.0,
            "commands": self.commands,
            "flops": self.flops,
            "elements": self.elements,
            "achieved_flops": self.flops / seconds if seconds > 0 else 0.0,
            "peak_flops": peak * clock_hz * lanes if peak is not None else None,
            "bytes_read": dict(self.bytes_read),
            "bytes_written": dict(self.bytes_written),
            "stall_cycles": dict(self.stall_cycles),
        }


@dataclass
class PECounters:
    pe: int
    row: int
    col: int
    units: dict[str, UnitCounters]


@dataclass
class Roofline:
    """Where the launch sits on the DRAM roofline."""

    flops: int
    dram_bytes: int
    arithmetic_intensity: float  # FLOPs per DRAM byte (inf without DRAM traffic)
    compute_roof: float  # FLOP/s: the DPE/SIMD/RED peak for this launch's mix of commands
    dram_bw: float  # bytes/s
    ridge_point: float  # FLOPs/byte where the roofs meet
    attainable_flops: float  # min(compute_roof, AI * dram_bw)
    achieved_flops: float
    fraction_of_roofline: float | None  # without FLOPs: achieved / peak DRAM bandwidth
    bound: str  # "compute", "memory" (also: no FLOPs but DRAM traffic) or "none"

    def to_dict(self) -> dict[str, Any]:
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "flops": self.flops, "dram_bytes": self.dram_bytes,
            "arithmetic_intensity": finite(self.arithmetic_intensity), "compute_roof": self.compute_roof,
            "dram_bw": self.dram_bw, "ridge_point": finite(self.ridge_point),
            "attainable_flops": self.attainable_flops, "achieved_flops": self.achieved_flops,
            "fraction_of_roofline": self.fraction_of_roofline, "bound": self.bound,
        }


@dataclass
class Counters:
    """All counters of a launch."""

    machine: str
    clock_hz: float
    kernel_cycles: float
    launch_cycles: float
    num_pes: int
    cores_per_pe: int
    pes: dict[int, PECounters]  # only PEs that ran programs
    totals: dict[str, UnitCounters]  # per unit, summed over PEs
    bandwidth: dict[str, dict[str, float | None]]  # level -> bytes, achieved and peak bytes/s, fraction
    roofline: Roofline
    sram_cache: dict[str, Any] = field(default_factory=dict)  # mode, hits/misses (sram_cache.CacheStats)
    core_time: dict[str, float] = field(default_factory=dict)
    """Every cycle of every core that ran programs, by name: "busy", "stall:<reason>", "idle" (after
    its last program, until the kernel ends). Sums to kernel_cycles x cores used (`core_slots`)."""
    core_slots: int = 0  # (PE, core) pairs that ran programs

    @property
    def kernel_seconds(self) -> float:
        return self.kernel_cycles / self.clock_hz

    @property
    def flops(self) -> int:
        return sum(u.flops for u in self.totals.values())

    def stall_reasons(self, *, include_queueing: bool = False) -> list[tuple[str, float]]:
        """Chip-wide stall cycles by reason (`UNIT:reason`), largest first.

        By default only stalls that leave a core or unit idle (fences, dependencies, shared
        bandwidth, full queues); `unit_busy` (commands queued behind a busy unit, which overlaps
        across queued commands) only with `include_queueing`.
        """
        table: dict[str, float] = {}
        for name, u in self.totals.items():
            for reason, cycles in u.stall_cycles.items():
                if include_queueing or reason != WAIT_UNIT:
                    _add(table, f"{name}:{reason}", cycles)
        return sorted(table.items(), key=lambda kv: -kv[1])

    def pe_bandwidth(self, pe: int) -> dict[str, dict[str, float]]:
        """Bytes/s one PE moved per memory level, and its share of the PE's local-store bandwidth."""
        units = self.pes[pe].units.values()
        s = self.kernel_seconds
        out = {}
        for level in LEVELS:
            nbytes = sum(u.bytes_read.get(level, 0) + u.bytes_written.get(level, 0) for u in units)
            if nbytes:
                out[level] = {"bytes": float(nbytes), "achieved_bw": nbytes / s if s > 0 else 0.0}
        return out

    def lanes(self, unit: str) -> int:
        return self.cores_per_pe if unit == "CORE" else 1

    def to_dict(self) -> dict[str, Any]:
        k, hz = self.kernel_cycles, self.clock_hz
        return {
            "machine": self.machine,
            "clock_hz": hz,
            "kernel_cycles": k,
            "launch_cycles": self.launch_cycles,
            "cycles": k + self.launch_cycles,
            "kernel_seconds": self.kernel_seconds,
            "seconds": (k + self.launch_cycles) / hz,
            "flops": self.flops,
            "achieved_flops": self.roofline.achieved_flops,
            "bandwidth": self.bandwidth,
            "roofline": self.roofline.to_dict(),
            "stall_reasons": dict(self.stall_reasons()),
            "sram_cache": dict(self.sram_cache),
            "core_time": dict(self.core_time),
            "core_slots": self.core_slots,
            "queue_wait_cycles": {n: u.stall_cycles.get(WAIT_UNIT, 0.0) for n, u in self.totals.items()
                                  if u.stall_cycles.get(WAIT_UNIT)},
            "totals": {n: u.to_dict(k, self.lanes(n) * self.num_pes, hz) for n, u in self.totals.items()},
            "pes": {str(p.pe): {"row": p.row, "col": p.col, "bandwidth": self.pe_bandwidth(p.pe),
                                "units": {n: u.to_dict(k, self.lanes(n), hz) for n, u in p.units.items()}}
                    for p in self.pes.values()},
        }


def _unit_counters(commands: Iterable[CommandRecord], programs: Iterable[ProgramRecord],
                   pe_ids: Iterable[int]) -> dict[int, dict[str, UnitCounters]]:
    per_pe = {pe: {n: UnitCounters(n) for n in UNIT_NAMES} for pe in pe_ids}
    busy_until: dict[tuple[int, str], float] = {}
    names = {u: u.name for u in Unit}
    for rec in commands:  # per unit, in start order (units start commands in issue order)
        ev = rec.event
        name = names[ev.unit]
        u = per_pe[rec.pe][name]
        key = (rec.pe, name)
        covered = busy_until.get(key, 0.0)  # busy = union of the command intervals (DMA may overlap)
        if rec.end > covered:
            u.busy_cycles += rec.end - (rec.start if rec.start > covered else covered)
            busy_until[key] = rec.end
        u.commands += 1
        if ev.flops:
            u.flops += ev.flops
            u.ideal_cycles += rec.ideal_cycles
        u.elements += ev.elements
        table = u.bytes_read  # as served: SRAM cache hits count as SRAM bytes
        for level, n in rec.bytes_read.items():
            if n:
                key = _LEVEL_KEY.get(level, level)
                table[key] = table.get(key, 0) + n
        table = u.bytes_written
        for level, n in rec.bytes_written.items():
            if n:
                key = _LEVEL_KEY.get(level, level)
                table[key] = table.get(key, 0) + n
        if rec.wait_unit:
            _add(u.stall_cycles, WAIT_UNIT, rec.wait_unit)
        if rec.wait_dependency:
            _add(u.stall_cycles, WAIT_DEPENDENCY, rec.wait_dependency)
        if rec.wait_bandwidth:
            _add(u.stall_cycles, WAIT_BANDWIDTH, rec.wait_bandwidth)
    for prog in programs:
        core = per_pe[prog.pe]["CORE"]
        core.busy_cycles += prog.busy_cycles
        core.elements += prog.instructions  # instructions retired
        core.commands += 1  # programs run
        for reason, cycles in prog.stalls.items():
            _add(core.stall_cycles, reason, cycles)
        for level, n in prog.mem_bytes.items():  # scalar loads and stores (CORE counts both as read)
            _add(core.bytes_read, level, n)
    return per_pe


def _core_time(programs: Iterable[ProgramRecord], kernel_cycles: float) -> tuple[dict[str, float], int]:
    """Every cycle of every core that ran programs: busy, stalls by reason, idle after its last program."""
    table: dict[str, float] = {}
    last_end: dict[tuple[int, int], float] = {}
    for prog in programs:
        _add(table, "busy", prog.busy_cycles)
        for reason, cycles in prog.stalls.items():
            _add(table, f"stall:{reason}", cycles)
        key = (prog.pe, prog.core)
        last_end[key] = max(last_end.get(key, 0.0), prog.end)
    idle = sum(kernel_cycles - end for end in last_end.values())
    _add(table, "idle", idle)
    return table, len(last_end)


def _roofline(m: MachineDescription, totals: dict[str, UnitCounters], seconds: float) -> Roofline:
    flops = sum(u.flops for u in totals.values())
    dram = totals["DMA"].bytes_read.get("dram", 0) + totals["DMA"].bytes_written.get("dram", 0)
    dram += sum(u.bytes_read.get("dram", 0) + u.bytes_written.get("dram", 0)
                for n, u in totals.items() if n != "DMA")
    # no unit can run its FLOPs faster than its throughput on all PEs at once
    floor_s = max((u.ideal_cycles / m.num_pes / m.clock_hz for u in totals.values() if u.flops), default=0.0)
    roof = flops / floor_s if floor_s > 0 else m.peak_flops("fp16")
    ai = flops / dram if dram else math.inf
    attainable = min(roof, ai * m.dram_bw) if flops else 0.0
    achieved = flops / seconds if seconds > 0 else 0.0
    if flops:
        fraction: float | None = achieved / attainable if attainable > 0 else None
        bound = "memory" if ai * m.dram_bw < roof else "compute"
    elif dram:  # pure data movement: the roof is the DRAM bandwidth itself
        fraction = dram / seconds / m.dram_bw if seconds > 0 else None
        bound = "memory"
    else:
        fraction, bound = None, "none"
    return Roofline(
        flops=flops, dram_bytes=dram, arithmetic_intensity=ai, compute_roof=roof, dram_bw=m.dram_bw,
        ridge_point=roof / m.dram_bw, attainable_flops=attainable, achieved_flops=achieved,
        fraction_of_roofline=fraction, bound=bound,
    )


def _bandwidth(m: MachineDescription, totals: dict[str, UnitCounters], seconds: float,
               active_pes: int) -> dict[str, dict[str, float | None]]:
    peaks: dict[str, float | None] = {
        "dram": m.dram_bw, "sram": m.sram_bw, "local": m.local_store_bw * max(active_pes, 1),
        "remote_local": m.noc_link_bw * max(active_pes, 1),
    }
    out: dict[str, dict[str, float | None]] = {}
    for level in LEVELS:
        nbytes = sum(u.bytes_read.get(level, 0) + u.bytes_written.get(level, 0) for u in totals.values())
        achieved = nbytes / seconds if seconds > 0 else 0.0
        peak = peaks[level]
        out[level] = {"bytes": float(nbytes), "achieved_bw": achieved, "peak_bw": peak,
                      "fraction": achieved / peak if peak else None}
    return out


def build_counters(m: MachineDescription, commands: list[CommandRecord], programs: list[ProgramRecord],
                   kernel_cycles: float, launch_cycles: float, sram_cache: dict[str, Any] | None = None
                   ) -> Counters:
    """Aggregate a schedule into counters (per PE and unit, chip totals, bandwidth, roofline)."""
    pe_ids = sorted({p.pe for p in programs} | {c.pe for c in commands})
    per_pe = _unit_counters(commands, programs, pe_ids)
    core_time, slots = _core_time(programs, kernel_cycles)
    return assemble_counters(m, per_pe, kernel_cycles, launch_cycles, sram_cache, core_time, slots)


def assemble_counters(m: MachineDescription, per_pe: dict[int, dict[str, UnitCounters]], kernel_cycles: float,
                      launch_cycles: float, sram_cache: dict[str, Any] | None, core_time: dict[str, float],
                      core_slots: int, totals: dict[str, UnitCounters] | None = None) -> Counters:
    """Counters from per-PE unit counters (chip totals, bandwidth, roofline); `build_counters` makes
    `per_pe` from records, the native timing replay from its own sums (and its `totals`: the sum of
    `per_pe` over PEs, computed here when not given)."""
    if totals is None:
        totals = {n: UnitCounters(n) for n in UNIT_NAMES}
        for units in per_pe.values():
            for n, u in units.items():
                totals[n].add(u)
    seconds = kernel_cycles / m.clock_hz
    pes = {pe: PECounters(pe, *m.pe_coords(pe), units=units) for pe, units in per_pe.items()}
    return Counters(
        machine=m.name, clock_hz=m.clock_hz, kernel_cycles=kernel_cycles, launch_cycles=launch_cycles,
        num_pes=m.num_pes, cores_per_pe=m.cores_per_pe, pes=pes, totals=totals,
        bandwidth=_bandwidth(m, totals, seconds, len(per_pe)), roofline=_roofline(m, totals, seconds),
        sram_cache=dict(sram_cache or {}), core_time=core_time, core_slots=core_slots,
    )
