"""Chrome / Perfetto trace-event JSON of a timing run (open in ui.perfetto.dev or chrome://tracing).

One process per PE (pid = PE index), one thread (track) per unit of that PE: a track per core
(program spans) and one per fixed-function unit (commands). Times are microseconds from the start
of the launch; the launch overhead is a span on the "host" process.

Commands carry their Triton source line when the kernel's command tags are known (`tags`, or a
`.tags` attribute on the result: `tags[N - 1] = "<ttir op> <file>:<line>:<col>"`): the event is
named `DMA_COPY seed.py:19` and its args hold `source` (and `source_text` when given). A trace
written without them can be labelled afterwards with `label_trace_file`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mtia_sim.isa import Unit
from mtia_sim.timing import as_timing_result
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


_POSITION = re.compile(r"(?P<file>\S+?):(?P<line>\d+):(?P<col>\d+)\s*$")


def source_labels(tags: Sequence[str]) -> dict[int, str]:
    """Command tag -> `file:line` (file name only) for the tags that carry a source position."""
    out = {}
    for i, tag in enumerate(tags, start=1):
        m = _POSITION.search(str(tag))
        if m is not None:
            out[i] = f"{Path(m['file']).name}:{m['line']}"
    return out


def trace_events(result: Any, tags: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The trace as a list of trace events (metadata first, then complete 'X' events)."""
    labels = source_labels(tags if tags is not None else getattr(result, "tags", None) or ())
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
        where = labels.get(ev.tag)
        if where:
            args["source"] = where
        events.append({
            "ph": "X", "pid": rec.pe, "tid": unit_tid(ev.unit, rec.slot), "cat": ev.unit.name,
            "name": ev.op.name + (f" {where}" if where else f" #{ev.tag}" if ev.tag else ""),
            "ts": (t0 + rec.start) * us, "dur": (rec.end - rec.start) * us, "args": args,
        })
    return events


def label_events(events: list[dict[str, Any]], labels: Mapping[int, str],
                 texts: Mapping[int, str] | None = None) -> int:
    """Name command events by source (`labels`: tag -> `file:line`, `texts`: tag -> the line's code);
    returns how many events were labelled."""
    n = 0
    for ev in events:
        args = ev.get("args") or {}
        tag = args.get("tag")
        if ev.get("ph") != "X" or not isinstance(tag, int) or tag not in labels:
            continue
        op = str(ev.get("name", "")).split(" ", 1)[0]
        ev["name"] = f"{op} {labels[tag]}"
        args["source"] = labels[tag]
        if texts and texts.get(tag):
            args["source_text"] = texts[tag]
        n += 1
    return n


def label_trace_file(
    path: str | Path, labels: Mapping[int, str], texts: Mapping[int, str] | None = None
) -> int:
    """Label the command events of a trace file written earlier (see `label_events`)."""
    doc = json.loads(Path(path).read_text())
    n = label_events(doc.get("traceEvents", []), labels, texts)
    Path(path).write_text(json.dumps(doc))
    return n


def trace_json(result: Any, tags: Sequence[str] | None = None) -> dict[str, Any]:
    """The whole trace document (JSON object format)."""
    events = trace_events(result, tags)
    result = as_timing_result(result)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"machine": result.machine.name, "cycles": result.cycles,
                          "clock_hz": result.machine.clock_hz}}


def write_trace(result: Any, path: str | Path, tags: Sequence[str] | None = None) -> Path:
    """Write the Chrome/Perfetto trace JSON to `path`; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(trace_json(result, tags)))
    return out
