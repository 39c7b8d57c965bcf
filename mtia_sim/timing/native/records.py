"""Records and counters of a native replay, built from its arrays (records lazily, on first use)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mtia_sim.counters import (
    UNIT_NAMES,
    WAIT_BANDWIDTH,
    WAIT_DEPENDENCY,
    WAIT_UNIT,
    Counters,
    UnitCounters,
    assemble_counters,
)
from mtia_sim.events import CommandEvent, ProgramTrace
from mtia_sim.machine import MachineDescription
from mtia_sim.timing.native import LEVELS, NSTALL, STALL_NAMES, NativeRun
from mtia_sim.timing.result import CommandRecord, ProgramRecord
from mtia_sim.timing.sram_cache import Routed

_LEVEL_KEYS = tuple(level.value for level in LEVELS)


def command_records(run: NativeRun, traces: list[ProgramTrace]) -> list[CommandRecord]:
    """One CommandRecord per command, in issue order (as the Python replay lists them)."""
    events = [e for tr in traces for e in tr.events if type(e) is CommandEvent]
    out = []
    for row in run.commands.tolist():
        routed = None
        if row[12]:
            read = {lv: v for lv, v in zip(LEVELS, row[15:19], strict=True) if not math.isnan(v)}
            written = {lv: v for lv, v in zip(LEVELS, row[19:23], strict=True) if not math.isnan(v)}
            routed = Routed(read, written, sram_fill=row[13], fill_id=int(row[14]))
        out.append(CommandRecord(
            pe=int(row[1]), core=int(row[2]), program=int(row[3]), event=events[int(row[0])], issue=row[4],
            start=row[5], end=row[6], wait_unit=row[7], wait_dependency=row[8], wait_bandwidth=row[9],
            ideal_cycles=row[10], slot=int(row[11]), routed=routed))
    return out


def program_records(run: NativeRun, traces: list[ProgramTrace]) -> list[ProgramRecord]:
    """One ProgramRecord per program, in the order the cores started them."""
    out = []
    for row in run.programs.tolist():
        stalls = {name: v for name, v in zip(STALL_NAMES, row[10:], strict=True) if v > 0}
        mem = {lv: int(v) for lv, v in (("dram", row[8]), ("sram", row[9])) if v}
        i = int(row[0])
        out.append(ProgramRecord(program=i, program_id=traces[i].program_id, pe=int(row[1]), core=int(row[2]),
                                 start=row[3], end=row[4], instructions=int(row[5]), busy_cycles=row[6],
                                 stalls=stalls, mem_accesses=int(row[7]), mem_bytes=mem))
    return out


def timeline(run: NativeRun) -> list[tuple[float, float, float]]:
    """The bandwidth timeline as (cycle, DRAM bytes/cycle, SRAM bytes/cycle) samples."""
    return [(t, d, s) for t, d, s in run.timeline.tolist()]


def _bytes(values: list[float], routed: list[float]) -> dict[str, Any]:
    """Bytes per level (ints unless a cache-routed, float, figure contributed), non-zero only."""
    return {k: (v if r or not v.is_integer() else int(v))
            for k, v, r in zip(_LEVEL_KEYS, values, routed, strict=True) if v}


def _unit(name: str, row: list[float]) -> UnitCounters:
    """A unit's counters from its row of the native command sums (see api.c kt_unit_counters)."""
    c = UnitCounters(name, busy_cycles=row[0], commands=int(row[1]), flops=int(row[2]), ideal_cycles=row[3],
                     elements=int(row[4]), bytes_read=_bytes(row[5:9], row[16:20]),
                     bytes_written=_bytes(row[9:13], row[20:24]))
    waits = ((WAIT_UNIT, row[13]), (WAIT_DEPENDENCY, row[14]), (WAIT_BANDWIDTH, row[15]))
    c.stall_cycles = {k: v for k, v in waits if v}
    return c


def _core(row: list[float]) -> UnitCounters:
    """The control core's counters from its row of the native program sums (kt_core_counters)."""
    return UnitCounters("CORE", busy_cycles=row[0], commands=int(row[1]), elements=int(row[2]),
                        bytes_read={lv: int(v) for lv, v in (("dram", row[3]), ("sram", row[4])) if v},
                        stall_cycles={name: v for name, v in zip(STALL_NAMES, row[5:], strict=True) if v > 0})


def counters(m: MachineDescription, run: NativeRun, launch_cycles: float) -> Counters:
    """The launch's counters (what `mtia_sim.counters.build_counters` makes from the records)."""
    width = 5 + NSTALL
    per_core = run.core_counters[:m.num_pes * width].reshape(m.num_pes, width)
    used = np.flatnonzero(per_core[:, 1])
    units = run.unit_counters[used]  # (used PEs, unit, column)
    rows, cores = units.tolist(), per_core[used].tolist()
    per_pe = {}
    for pe, unit_rows, core_row in zip(used.tolist(), rows, cores, strict=True):
        per_pe[pe] = {name: _unit(name, r) if r[1] else UnitCounters(name)
                      for name, r in zip(UNIT_NAMES, unit_rows, strict=True)}
        per_pe[pe]["CORE"] = _core(core_row)
    sums = units.sum(axis=0)  # the chip totals, per unit (routed flags: any PE)
    sums[:, 16:] = units[:, :, 16:].max(axis=0, initial=0.0)
    totals = {name: _unit(name, r) for name, r in zip(UNIT_NAMES, sums.tolist(), strict=True)}
    totals["CORE"] = _core(per_core[used].sum(axis=0).tolist())
    total = run.core_counters[m.num_pes * width:].tolist()
    core_time = {"busy": total[0]} if total[0] else {}
    stalls = zip(STALL_NAMES, total[1:1 + NSTALL], strict=True)
    core_time.update((f"stall:{name}", v) for name, v in stalls if v > 0)
    if total[1 + NSTALL]:
        core_time["idle"] = total[1 + NSTALL]
    return assemble_counters(m, per_pe, run.makespan, launch_cycles, run.cache.to_dict(), core_time,
                             int(total[2 + NSTALL]), totals=totals)
