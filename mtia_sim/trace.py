"""Chrome / Perfetto trace-event JSON of a timing run (open in ui.perfetto.dev or chrome://tracing).

One process per PE (pid = PE index), one thread (track) per unit of that PE: a track per core
(program spans) and one per fixed-function unit (commands). Times are microseconds from the start
of the launch; the launch overhead is a span on the "host" process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtia_sim.isa import Unit
from mtia_sim.timing import TimingResult, as_timing_result
from mtia_sim.timing.engine import iter_units

CORE_TID_BASE = 0  # core c of a PE is tid c; unit u is tid 10 + u (+ 10 per extra in-flight slot)
UNIT_TID_BASE = 10


def unit_tid(unit: Unit, slot: int = 0) -> int:
    return UNIT_TID_BASE + int(unit) + 10 * slot


def _meta(pid: int, tid: int | None, kind: str, name: str, sort: int | None = None) -> list[dict[str, Any]]:
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    out = [ev]
    if sort is not None:
        sort_kind = "thread_sort_index" if tid is not None else "process_sort_index"
        out.append({"ph": "M", "pid": pid, "tid": tid or 0, "name": sort_kind, "args": {"sort_index": sort}})
    return out


def trace_events(result: TimingResult) -> list[dict[str, Any]]:
    """The trace as a list of trace events (metadata first, then complete 'X' events)."""
    result = as_timing_result(result)
    m = result.machine
    us = 1e6 / m.clock_hz  # microseconds per cycle
    t0 = result.launch_cycles
    host = m.num_pes
    events: list[dict[str, Any]] = []
    events += _meta(host, None, "process_name", "host", sort=-1)
    events += _meta(host, 0, "thread_name", "launch")
    if result.launch_cycles:
        events.append({"ph": "X", "pid": host, "tid": 0, "name": "launch overhead", "cat": "launch",
                       "ts": 0.0, "dur": result.launch_cycles * us})
    gbs = m.clock_hz / 1e9  # bytes/cycle -> GB/s
    for cycle, dram, sram in result.bandwidth_timeline:
        events.append({"ph": "C", "pid": host, "name": "bandwidth in flight (GB/s)",
                       "ts": (t0 + cycle) * us, "args": {"DRAM": dram * gbs, "SRAM": sram * gbs}})
    pes = sorted({p.pe for p in result.programs})
    for pe in pes:
        row, col = m.pe_coords(pe)
        events += _meta(pe, None, "process_name", f"PE {pe} (row {row}, col {col})", sort=pe)
        for core in range(m.cores_per_pe):
            events += _meta(pe, CORE_TID_BASE + core, "thread_name", f"core {core}", sort=core)
        for unit in iter_units():
            slots = m.dma_max_in_flight if unit == Unit.DMA else 1
            for slot in range(slots):
                name = unit.name if slot == 0 else f"{unit.name} (in flight {slot + 1})"
                events += _meta(pe, unit_tid(unit, slot), "thread_name", name, sort=unit_tid(unit, slot))
    for prog in result.programs:
        events.append({
            "ph": "X", "pid": prog.pe, "tid": CORE_TID_BASE + prog.core, "cat": "program",
            "name": "program ({}, {}, {})".format(*prog.program_id),
            "ts": (t0 + prog.start) * us, "dur": (prog.end - prog.start) * us,
            "args": {"instructions": prog.instructions, "busy_cycles": prog.busy_cycles,
                     "stall_cycles": prog.stalls},
        })
    for rec in result.commands:
        ev = rec.event
        args: dict[str, Any] = {"tag": ev.tag, "pc": hex(ev.pc), "core": rec.core, "program": rec.program,
                                "elements": ev.elements, "issue_us": (t0 + rec.issue) * us,
                                "wait_unit_cycles": rec.wait_unit,
                                "wait_dependency_cycles": rec.wait_dependency}
        if ev.flops:
            args["flops"] = ev.flops
        if ev.matmul_mnk:
            args["mnk"] = list(ev.matmul_mnk)
        if ev.bytes_read:
            args["bytes_read"] = {str(k): v for k, v in ev.bytes_read.items()}
        if ev.bytes_written:
            args["bytes_written"] = {str(k): v for k, v in ev.bytes_written.items()}
        if rec.wait_bandwidth:
            args["wait_bandwidth_cycles"] = rec.wait_bandwidth
        events.append({
            "ph": "X", "pid": rec.pe, "tid": unit_tid(ev.unit, rec.slot), "cat": ev.unit.name,
            "name": ev.op.name + (f" #{ev.tag}" if ev.tag else ""),
            "ts": (t0 + rec.start) * us, "dur": (rec.end - rec.start) * us, "args": args,
        })
    return events


def trace_json(result: TimingResult) -> dict[str, Any]:
    """The whole trace document (JSON object format)."""
    result = as_timing_result(result)
    return {"traceEvents": trace_events(result), "displayTimeUnit": "ns",
            "otherData": {"machine": result.machine.name, "cycles": result.cycles,
                          "clock_hz": result.machine.clock_hz}}


def write_trace(result: TimingResult, path: str | Path) -> Path:
    """Write the Chrome/Perfetto trace JSON to `path`; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(trace_json(result)))
    return out
