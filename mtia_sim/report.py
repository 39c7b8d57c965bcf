"""A profile report of a timing run, shaped like a GPU profiler's (text and JSON), plus a roofline plot.

The text is what a person or the next prompt reads: the summary (time, achieved FLOP/s and bandwidth
against the peaks, roofline position and bound), the hottest units and commands, the top stall
reasons with a hint each (what usually helps, `mtia_sim.stats.STALLS`: the same table kegen's prompts
read), and a per-unit utilisation table. Numbers are written by `mtia_sim.stats` (`fmt_si`, `fmt_pct`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mtia_sim.machine import MachineDescription
from mtia_sim.stats import WAIT_UNIT, fmt_pct, fmt_si, stall_reason
from mtia_sim.timing import TimingResult, as_timing_result

_LEVEL_NAMES = {"dram": "DRAM", "sram": "SRAM", "local": "local store", "remote_local": "remote local (NoC)"}


def _si(x: float | None, unit: str) -> str:
    return fmt_si(x, unit, spec=".3g", small=".3g", missing="n/a")


def _pct(x: float | None) -> str:
    return fmt_pct(x, ".1f", missing="n/a")


def _hint(reason: str) -> str:
    """What usually helps against a stall reason (`mtia_sim.stats.STALLS`), '' for an undeclared one."""
    declared = stall_reason(reason)
    return declared.remedy if declared is not None else ""


def _lanes(result: TimingResult, unit: str) -> int:
    """Unit instances that ran work: active cores for CORE, active PEs for the others."""
    if unit == "CORE":
        return max(len({(p.pe, p.core) for p in result.programs}), 1)
    return max(len(result.counters.pes), 1)


def _stall_ranking(result: TimingResult) -> list[dict[str, Any]]:
    """Stalls that leave a unit or core idle (not overlapping within one unit), largest first.

    Queueing behind a busy unit (`unit_busy`) is not idle time of anything; it is reported apart.
    """
    c = result.counters
    rows = []
    for name, total in c.totals.items():
        unit_time = c.kernel_cycles * _lanes(result, name)
        for reason, cycles in total.stall_cycles.items():
            if reason == WAIT_UNIT:
                continue
            full = f"{name}:{reason}"
            rows.append({"reason": full, "cycles": cycles,
                         "share_of_unit_time": cycles / unit_time if unit_time else 0.0, "hint": _hint(full)})
    return sorted(rows, key=lambda r: -r["share_of_unit_time"])


def _unit_rows(result: TimingResult) -> list[dict[str, Any]]:
    c = result.counters
    cores_used: dict[int, set[int]] = {}
    for prog in result.programs:
        cores_used.setdefault(prog.pe, set()).add(prog.core)
    rows = []
    for name, total in c.totals.items():
        if not total.commands and not total.busy_cycles:
            continue
        lanes = c.lanes(name)

        def pe_lanes(pe: int, name: str = name) -> int:  # CORE: the cores that ran programs
            return max(len(cores_used.get(pe, ())), 1) if name == "CORE" else 1

        per_pe = [(p.units[name].busy_cycles / (c.kernel_cycles * pe_lanes(p.pe)) if c.kernel_cycles else 0.0,
                   p.pe) for p in c.pes.values()]
        util_max, busiest = max(per_pe, default=(0.0, -1))
        rows.append({
            "unit": name, "commands": total.commands, "busy_cycles": total.busy_cycles,
            "utilization_avg": total.busy_cycles / (c.kernel_cycles * lanes * c.num_pes)
            if c.kernel_cycles else 0.0,
            "utilization_active_pes": (sum(u for u, _ in per_pe) / len(per_pe)) if per_pe else 0.0,
            "utilization_max": util_max, "busiest_pe": busiest, "flops": total.flops,
            "bytes_read": total.bytes_read, "bytes_written": total.bytes_written,
            "idle_stall_cycles": total.stall_total - total.stall_cycles.get(WAIT_UNIT, 0.0),
            "avg_queue_wait": total.stall_cycles.get(WAIT_UNIT, 0.0) / total.commands
            if total.commands and name != "CORE" else 0.0,
        })
    return sorted(rows, key=lambda r: -float(r["utilization_active_pes"]))


def _hot_commands(result: TimingResult, top: int) -> list[dict[str, Any]]:
    table: dict[tuple[str, str, int], list[float]] = {}
    for rec in result.commands:
        ev = rec.event
        row = table.setdefault((ev.unit.name, ev.op.name, ev.tag), [0.0, 0.0, 0.0, 0.0, 0.0])
        row[0] += rec.end - rec.start
        row[1] += 1
        row[2] += ev.flops
        row[3] += rec.wait_dependency
        row[4] += rec.wait_bandwidth
    total = sum(r[0] for r in table.values()) or 1.0
    ranked = sorted(table.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"unit": u, "op": op, "tag": tag, "busy_cycles": b, "share": b / total, "count": int(n),
             "flops": int(f), "avg_busy_cycles": b / n, "avg_wait_dependency": dep / n,
             "avg_wait_bandwidth": bw / n} for (u, op, tag), (b, n, f, dep, bw) in ranked]


def report_dict(result: TimingResult, machine: MachineDescription | None = None, *,
                top: int = 8) -> dict[str, Any]:
    """The profile as JSON-serialisable data: counters plus the report's rankings."""
    result = as_timing_result(result)
    c = result.counters
    m = machine or result.machine
    return {
        "machine": m.name,
        "summary": {
            "seconds": result.seconds, "kernel_seconds": result.kernel_seconds, "cycles": result.cycles,
            "kernel_cycles": result.kernel_cycles, "launch_cycles": result.launch_cycles,
            "active_pes": len(c.pes), "num_pes": m.num_pes, "flops": c.flops,
            "achieved_flops": c.roofline.achieved_flops, "compute_roof": c.roofline.compute_roof,
            "bound": c.roofline.bound, "fraction_of_roofline": c.roofline.fraction_of_roofline,
        },
        "balance": _balance(result),
        "units": _unit_rows(result),
        "hot_commands": _hot_commands(result, top),
        "stalls": _stall_ranking(result)[:top],
        "counters": c.to_dict(),
    }


def _balance(result: TimingResult) -> dict[str, Any]:
    """How evenly programs spread over the cores: the makespan is the busiest core's finish."""
    finish: dict[tuple[int, int], float] = {}
    count: dict[tuple[int, int], int] = {}
    for p in result.programs:
        key = (p.pe, p.core)
        finish[key] = max(finish.get(key, 0.0), p.end)
        count[key] = count.get(key, 0) + 1
    if not finish:
        return {"programs": 0, "cores": 0}
    mean = sum(finish.values()) / len(finish)
    last = max(finish, key=lambda k: finish[k])
    return {"programs": len(result.programs), "cores": len(finish),
            "max_programs_per_core": max(count.values()), "min_programs_per_core": min(count.values()),
            "last_core": {"pe": last[0], "core": last[1]},
            "mean_core_finish_cycles": mean, "imbalance": finish[last] / mean if mean > 0 else 1.0}


def _summary_lines(result: TimingResult, m: MachineDescription) -> list[str]:
    c = result.counters
    r = c.roofline
    lines = [
        f"== profile: {m.name} ({m.num_pes} PEs @ {m.clock_hz / 1e9:.3g} GHz), {len(c.pes)} PEs active ==",
        f"time        {result.seconds * 1e6:.3f} us = launch {result.launch_cycles / m.clock_hz * 1e6:.3f} us"
        f" + kernel {result.kernel_seconds * 1e6:.3f} us ({result.kernel_cycles:.0f} cycles)",
    ]
    if r.flops:
        lines.append(f"compute     {_si(r.achieved_flops, 'FLOP/s')} of {_si(r.compute_roof, 'FLOP/s')} roof "
                     f"({_pct(r.achieved_flops / r.compute_roof if r.compute_roof else None)}), "
                     f"{_si(c.flops, 'FLOP')}")
    for level, bw in c.bandwidth.items():
        if bw["bytes"]:
            lines.append(f"{_LEVEL_NAMES[level]:<11} {_si(bw['achieved_bw'], 'B/s')} of "
                         f"{_si(bw['peak_bw'], 'B/s')}"
                         f" ({_pct(bw['fraction'])}), {_si(bw['bytes'], 'B')} moved")
    lines += _sram_lines(c.sram_cache)
    ai = "inf" if not math.isfinite(r.arithmetic_intensity) else f"{r.arithmetic_intensity:.3g}"
    if not r.flops:
        lines.append(f"roofline    no FLOPs: {r.bound}-bound"
                     + (f", {_pct(r.fraction_of_roofline)} of the DRAM bandwidth" if r.dram_bytes else ""))
        return lines + _balance_lines(result)
    lines.append(f"roofline    AI {ai} FLOP/DRAM-byte, ridge {r.ridge_point:.3g}: {r.bound}-bound; "
                 "attainable "
                 f"{_si(r.attainable_flops, 'FLOP/s')}, achieved {_pct(r.fraction_of_roofline)} of it")
    return lines + _balance_lines(result)


def _sram_lines(cache: dict[str, Any]) -> list[str]:
    """One line on the SRAM's role: cache hit rate, or resident/off."""
    if not cache:
        return []
    mode = cache.get("mode")
    hit, miss = cache.get("read_hit_bytes", 0.0), cache.get("read_miss_bytes", 0.0)
    if mode == "off":
        return ["sram cache  off (every DRAM access goes to DRAM)"]
    if not (hit or miss):
        return []
    what = "tensors resident in SRAM" if mode == "resident" else "memory-side cache"
    return [f"sram cache  {what}: {_pct(cache.get('hit_rate'))} of DRAM-addressed reads served on chip "
            f"({_si(hit, 'B')} hit, {_si(miss, 'B')} from DRAM), "
            f"{cache.get('evicted_lines', 0)} lines evicted"]


def _balance_lines(result: TimingResult) -> list[str]:
    b = _balance(result)
    lines = []
    if b["programs"]:
        lines.append(f"programs    {b['programs']} on {b['cores']} cores ({b['min_programs_per_core']}-"
                     f"{b['max_programs_per_core']} per core); last core to finish: "
                     f"PE {b['last_core']['pe']} core {b['last_core']['core']}, "
                     f"{b['imbalance']:.2f}x the mean finish")
    return lines


def format_report(result: TimingResult, machine: MachineDescription | None = None, *, top: int = 6) -> str:
    """The text profile of one launch (a TimingResult, or a launch result holding one)."""
    result = as_timing_result(result)
    m = machine or result.machine
    data = report_dict(result, m, top=top)
    lines = _summary_lines(result, m)
    hot = ", ".join(f"{u['unit']} {_pct(u['utilization_active_pes'])}" for u in data["units"][:3])
    lines.append(f"hottest     {hot} busy (average over active PEs)")
    lines.append("")
    lines.append("hottest commands (share of all unit busy time; #tag = source location; cycles per command)")
    waits_of = (("waited on deps", "avg_wait_dependency"), ("slowed by shared bw", "avg_wait_bandwidth"))
    for h in data["hot_commands"]:
        tag = f" #{h['tag']}" if h["tag"] else ""
        waits = "".join(f", {what} {h[key]:.0f}" for what, key in waits_of if h[key] >= 0.5)
        lines.append(f"  {h['share'] * 100:5.1f}%  {h['unit']:<5} {h['op'] + tag:<22} x{h['count']:<6} "
                     f"{h['avg_busy_cycles']:.0f} cycles each" + waits
                     + (f", {_si(h['flops'], 'FLOP')} total" if h["flops"] else ""))
    lines.append("")
    lines.append("top stall reasons (idle cycles summed over PEs; share of the unit's or core's time)")
    if not data["stalls"]:
        lines.append("  none")
    for s in data["stalls"]:
        hint = f"  <- {s['hint']}" if s["hint"] else ""
        lines.append(f"  {s['share_of_unit_time'] * 100:5.1f}%  {s['reason']:<28} {s['cycles']:>12.0f}{hint}")
    lines.append("")
    lines.append("unit    util(active)  util(max PE)  busiest PE  commands        FLOPs         bytes r/w"
                 "  avg queue wait   (CORE: programs run)")
    for u in data["units"]:
        rw = f"{_si(sum(u['bytes_read'].values()), 'B')}/{_si(sum(u['bytes_written'].values()), 'B')}"
        lines.append(f"{u['unit']:<6} {_pct(u['utilization_active_pes']):>13}  "
                     f"{_pct(u['utilization_max']):>12}"
                     f"  {u['busiest_pe']:>10}  {u['commands']:>8}  {_si(u['flops'], 'FLOP'):>11}"
                     f"  {rw:>16}  {u['avg_queue_wait']:>10.0f} cyc")
    return "\n".join(lines)


def plot_roofline(result: TimingResult, machine: MachineDescription | None, path: str | Path) -> Path:
    """Save a roofline plot (log-log, DRAM roof and this launch's compute roof) as an image."""
    result = as_timing_result(result)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = machine or result.machine
    r = result.counters.roofline
    ridge = r.ridge_point
    ai = r.arithmetic_intensity if math.isfinite(r.arithmetic_intensity) else ridge * 100
    xs = [min(ai, ridge) / 100, ridge, max(ai, ridge) * 100]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(xs, [min(r.compute_roof, x * m.dram_bw) for x in xs], label="roofline (DRAM, compute)")
    ax.axhline(m.peak_flops("fp16"), ls=":", color="gray", label="DPE fp16 peak")
    if r.achieved_flops > 0:
        ax.loglog([ai], [r.achieved_flops], "o", color="red", label=f"this launch ({r.bound}-bound)")
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"roofline: {m.name}")
    ax.legend(loc="lower right", fontsize=8)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out
