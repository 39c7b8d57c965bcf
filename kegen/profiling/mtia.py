"""The profile of one forward on the MTIA simulator, from the driver's launch records.

Input contract (kept stable for the evaluator and the device process): a list of records with
`.kernel` (name), `.grid` (3 ints), `.result` (a LaunchResult with `.seconds` and `.counters`, and
optionally `.timing` with command/program records) and optionally `.tags` (the kernel's command
tags). Counters are read defensively: the simulator may add counters (SRAM hits, scalar accesses,
named busy/stall states) and older ones may lack some.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kegen.profiling.bottleneck import launch_bottleneck
from kegen.profiling.schema import (
    KernelStat,
    LaunchStat,
    MemoryLevelStat,
    Profile,
    SourceLine,
    UnitStat,
)
from kegen.profiling.source import attribute_lines, finish_lines, tag_position

QUEUE_REASON = "unit_busy"  # queueing behind a busy unit: not idle time of anything


def counters_dict(counters: Any) -> dict[str, Any]:
    """The simulator's counters as a plain dict (a Counters object, a dict or None)."""
    if counters is None:
        return {}
    if hasattr(counters, "to_dict"):
        return dict(counters.to_dict())
    return dict(counters)


def _num_pes(counters: Any, machine: str) -> tuple[int, int]:
    """(PEs, cores per PE) of the chip."""
    pes, cores = getattr(counters, "num_pes", None), getattr(counters, "cores_per_pe", None)
    if pes and cores:
        return int(pes), int(cores)
    try:
        from mtia_sim.machine import load_machine

        m = load_machine(machine)
        return int(m.num_pes), int(m.cores_per_pe)
    except Exception:  # an unknown machine: fall back to the 8x8 MTIA, 2 cores
        return 64, 2


def _safe(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # LaunchResult raises when the timing model is unavailable
        return None


class _Acc:
    """Per-unit and per-level sums over the launches of one forward."""

    def __init__(self) -> None:
        self.units: dict[str, UnitStat] = {}
        self.unit_time: dict[str, float] = defaultdict(float)  # sum of kernel_cycles * lanes (all)
        self.active_time: dict[str, float] = defaultdict(float)  # ... over active PEs
        self.read: dict[str, float] = defaultdict(float)
        self.written: dict[str, float] = defaultdict(float)
        self.peak: dict[str, float] = {}
        self.stalls: dict[str, float] = defaultdict(float)
        self.stall_den: dict[str, float] = defaultdict(float)
        self.sram_hit = self.sram_miss = 0.0  # bytes read through the SRAM cache
        self.core_time: dict[str, float] = defaultdict(float)  # named busy/stall/idle states

    def add(
        self, c: dict[str, Any], pes_total: int, pes_used: int, cores_per_pe: int, cores_used: int
    ) -> None:
        k = float(c.get("kernel_cycles", 0.0) or 0.0)
        for name, u in (c.get("totals") or {}).items():
            lanes_all = pes_total * (cores_per_pe if name == "CORE" else 1)
            lanes_active = cores_used if name == "CORE" else pes_used
            stat = self.units.setdefault(name, UnitStat(name, 0.0, commands=0, flops=0.0))
            stat.busy_cycles = (stat.busy_cycles or 0.0) + float(u.get("busy_cycles", 0.0) or 0.0)
            stat.commands = (stat.commands or 0) + int(u.get("commands", 0) or 0)
            stat.flops = (stat.flops or 0.0) + float(u.get("flops", 0) or 0)
            for reason, cyc in (u.get("stall_cycles") or {}).items():
                stat.stall_cycles[reason] = stat.stall_cycles.get(reason, 0.0) + float(cyc or 0.0)
                if reason != QUEUE_REASON:
                    self.stalls[f"{name}:{reason}"] += float(cyc or 0.0)
            self.unit_time[name] += k * lanes_all
            self.active_time[name] += k * max(lanes_active, 1)
            self.stall_den[name] += k * max(lanes_active, 1)
            for level, n in (u.get("bytes_read") or {}).items():
                self.read[str(level)] += float(n or 0)
            for level, n in (u.get("bytes_written") or {}).items():
                self.written[str(level)] += float(n or 0)
        sram = c.get("sram_cache") or {}
        self.sram_hit += float(sram.get("read_hit_bytes", 0.0) or 0.0)
        self.sram_miss += float(sram.get("read_miss_bytes", 0.0) or 0.0)
        for state, cyc in (c.get("core_time") or {}).items():
            self.core_time[str(state)] += float(cyc or 0.0)
        for level, bw in (c.get("bandwidth") or {}).items():
            if isinstance(bw, dict) and bw.get("peak_bw"):
                self.peak[str(level)] = float(bw["peak_bw"])

    def finish_units(self) -> list[UnitStat]:
        for name, stat in self.units.items():
            busy = stat.busy_cycles or 0.0
            stat.utilization = busy / self.unit_time[name] if self.unit_time[name] else 0.0
            stat.utilization_active = busy / self.active_time[name] if self.active_time[name] else 0.0
        core = self.units.get("CORE")
        if core is not None and self.core_time:
            core.extra["time_breakdown"] = dict(self.core_time)  # every core cycle, named
        used = [u for u in self.units.values() if u.commands or u.busy_cycles]
        return sorted(used, key=lambda u: -(u.utilization_active or 0.0))

    def stall_shares(self) -> dict[str, float]:
        out = {}
        for reason, cyc in self.stalls.items():
            den = self.stall_den.get(reason.split(":", 1)[0], 0.0)
            out[reason] = cyc / den if den else 0.0
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _launch_stat(rec: Any, c: dict[str, Any], pes_total: int, cores_per_pe: int) -> LaunchStat:
    res = rec.result
    grid = [int(g) for g in rec.grid]
    programs = 1
    for g in grid:
        programs *= max(g, 1)
    timing = _safe(res, "timing")
    progs = list(getattr(timing, "programs", None) or [])
    pes_used = len(c.get("pes") or {}) or len({p.pe for p in progs})
    cores_used = len({(p.pe, p.core) for p in progs}) or min(programs, max(pes_used, 1) * cores_per_pe)
    hz = float(c.get("clock_hz", 0.0) or 0.0)
    overhead = float(c.get("launch_cycles", 0.0) or 0.0) / hz if hz else 0.0
    stat = LaunchStat(
        kernel=str(rec.kernel),
        grid=grid,
        time_s=float(res.seconds),
        programs=programs,
        pes_used=pes_used,
        pes_total=pes_total,
        cores_used=cores_used,
        cores_total=pes_total * cores_per_pe,
        launch_overhead_s=overhead,
    )
    k = float(c.get("kernel_cycles", 0.0) or 0.0)
    per_pe_busy: list[float] = []
    best = ("", 0.0)
    for pe in (c.get("pes") or {}).values():
        units = pe.get("units") or {}
        per_pe_busy.append(
            max((float(u.get("busy_cycles", 0.0) or 0.0) for u in units.values()), default=0.0)
        )
    for name, u in (c.get("totals") or {}).items():
        lanes = (cores_used if name == "CORE" else pes_used) or 1
        util = float(u.get("busy_cycles", 0.0) or 0.0) / (k * lanes) if k else 0.0
        if util > best[1]:
            best = (name, util)
    stat.busiest_unit, stat.busiest_util = best
    if per_pe_busy and sum(per_pe_busy) > 0:
        stat.imbalance = max(per_pe_busy) / (sum(per_pe_busy) / len(per_pe_busy))
    return stat


def from_mtia_launches(launches: list[Any], machine: str, roofline: dict[str, Any]) -> Profile:
    """Profile of one forward on mtia from the driver's launch records (kernel, grid, result, tags)."""
    total = sum(float(r.result.seconds) for r in launches)
    acc = _Acc()
    kernels: dict[str, KernelStat] = {}
    stats: list[LaunchStat] = []
    lines: dict[tuple[str, int], SourceLine] = {}
    line_cycles, flops = 0.0, 0.0
    bottlenecks = []
    for rec in launches:
        counters = _safe(rec.result, "counters")
        c = counters_dict(counters)
        pes_total, cores_per_pe = _num_pes(counters, machine)
        st = _launch_stat(rec, c, pes_total, cores_per_pe)
        stats.append(st)
        acc.add(c, pes_total, st.pes_used, cores_per_pe, st.cores_used)
        flops += float(c.get("flops", 0) or 0)
        k = kernels.setdefault(st.kernel, KernelStat(st.kernel, 0, 0.0, extra={"grid": st.grid}))
        k.calls += 1
        k.total_s += st.time_s
        tags = getattr(rec, "tags", None) or getattr(rec.result, "tags", None) or ()
        positions = [tag_position(tags, i) for i in range(1, len(tags) + 1)]
        st.tag_lines = [line for _, line in positions]
        st.source_file = next((Path(f).name for f, line in positions if line), "")
        timing = _safe(rec.result, "timing")
        line_cycles += attribute_lines(getattr(timing, "commands", None) or [], tags, st.kernel, lines)
        bottlenecks.append((st.time_s, launch_bottleneck(st, c)))
    for k in kernels.values():
        k.share = k.total_s / total if total else 0.0
    units = acc.finish_units()
    memory = _memory(acc, total, roofline)
    metrics = _metrics(stats, memory, flops, total, roofline)
    prof = Profile(
        target="mtia",
        device=machine,
        time_s=total,
        kernels=list(kernels.values()),
        launches=stats,
        units=units,
        memory=memory,
        metrics=metrics,
        stalls=dict(sorted(acc.stalls.items(), key=lambda kv: -kv[1])),
        stall_shares=acc.stall_shares(),
        lines=finish_lines(lines, line_cycles),
        roofline=roofline,
        sources=["mtia_sim counters"],
    )
    if bottlenecks:
        prof.bottleneck = max(bottlenecks, key=lambda tb: tb[0])[1]
        if len(launches) > 1 and total:
            share = max(st.time_s for st in stats) / total
            prof.bottleneck.evidence.insert(
                0, f"read from {prof.bottleneck.kernel}, the longest launch ({share:.0%} of the forward)"
            )
    if not lines and launches:
        prof.notes.append("no command tags in the launch records: no per-line attribution")
    return prof


def _memory(acc: _Acc, total: float, roofline: dict[str, Any]) -> list[MemoryLevelStat]:
    out = []
    reads = acc.sram_hit + acc.sram_miss
    hit_rate = acc.sram_hit / reads if reads else None
    for level in sorted(set(acc.read) | set(acc.written), key=_level_order):
        nbytes = acc.read[level] + acc.written[level]
        if not nbytes:
            continue
        out.append(
            MemoryLevelStat(
                level=level,
                bytes_read=acc.read[level],
                bytes_written=acc.written[level],
                achieved_bw=nbytes / total if total else None,
                peak_bw=acc.peak.get(level),
                compulsory_bytes=float(roofline["bytes"])
                if level == "dram" and roofline.get("bytes")
                else None,
                hit_rate=hit_rate if level == "sram" else None,
            )
        )
    return out


def _level_order(level: str) -> int:
    order = ("dram", "sram", "remote_local", "local")
    return order.index(level) if level in order else len(order)


def _metrics(
    stats: list[LaunchStat],
    memory: list[MemoryLevelStat],
    flops: float,
    total: float,
    roofline: dict[str, Any],
) -> dict[str, float]:
    m: dict[str, float] = {"time_s": total, "launches": float(len(stats)), "flops": flops}
    if not stats:
        return m
    overhead = sum(s.launch_overhead_s for s in stats)
    m["launch_overhead_s"] = overhead
    m["kernel_time_s"] = total - overhead
    m["programs"] = float(sum(s.programs for s in stats))
    m["pes_used"] = float(max(s.pes_used for s in stats))
    m["pes_total"] = float(stats[0].pes_total)
    if total:
        m["idle_pe_pct"] = 100 * sum(s.time_s * (1 - s.pes_used / max(s.pes_total, 1)) for s in stats) / total
        m["load_imbalance"] = sum(s.time_s * s.imbalance for s in stats) / total
        m["achieved_flops"] = flops / total
    if roofline.get("peak_flops") and total:
        m["compute_pct"] = 100 * flops / total / float(roofline["peak_flops"])
    for lv in memory:
        m[f"{lv.level}_bytes"] = lv.bytes_total
        if lv.level == "sram" and lv.hit_rate is not None:
            m["sram_hit_rate_pct"] = 100 * lv.hit_rate
    dram = next((lv for lv in memory if lv.level == "dram"), None)
    if dram is not None:
        if dram.achieved_bw is not None:
            m["achieved_dram_bw"] = dram.achieved_bw
        if dram.utilization is not None:
            m["dram_bw_pct"] = 100 * dram.utilization
        if dram.compulsory_bytes:
            m["compulsory_dram_bytes"] = dram.compulsory_bytes
            m["dram_excess"] = dram.bytes_total / dram.compulsory_bytes
    if roofline.get("fraction") is not None:
        m["roofline_fraction"] = float(roofline["fraction"])
    return m
