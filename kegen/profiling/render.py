"""One renderer per audience: `terminal` (kegen eval/profile), `prompt` (the LLM), `html` (the report),
plus `source_view` (per Triton source line, `kegen profile --source`), `diagnosis_line` (a diagnosis
in one line) and `reference_section` (the problem's roofline for drafting prompts). Numbers are written
by `mtia_sim.stats` (`fmt_si`, `fmt_time`, `fmt_pct`, `fmt_value`: the simulator's report uses them too).

The prompt renderer has detail levels so the prompt's token budget can shrink the profile
section step by step instead of cutting it at a character count.
"""

from __future__ import annotations

import html as _html
from typing import Any

from kegen.profiling.bottleneck import IDLE_PES
from kegen.profiling.compare import changes
from kegen.profiling.diagnosis import REMEDIES, Diagnosis, diagnose_profile
from kegen.profiling.schema import METRICS, Profile
from kegen.profiling.stalls import stall_info
from mtia_sim.stats import fmt_pct, fmt_si, fmt_time, fmt_value

PROMPT_DETAIL_MAX = 3


def fmt_metric(name: str, v: float) -> str:
    """A metric value in its declared unit (`METRICS`)."""
    unit = METRICS[name].unit if name in METRICS else ("%" if name.endswith("_pct") else "")
    return fmt_value(v, unit)


def diagnosis_line(d: Diagnosis) -> str:
    """A diagnosis in one line: limiter, time, roofline, utilisation, stalls (prompt detail 0)."""
    if d.bottleneck is None and not d.stalls and not d.utilisation:
        return "no profile available"
    b = d.bottleneck
    parts = [f"{b.category}-bound: limited by {b.name} ({b.kind})" if b else "limiter unknown"]
    if d.time_s is not None:
        parts.append(f"time {d.time_s * 1e6:.2f} us")
    if d.roofline_fraction is not None:
        parts.append(f"{d.roofline_fraction:.1%} of roofline")
    if d.idle_pes >= IDLE_PES:
        parts.append(f"{d.idle_pes:.0%} of PEs idle")
    if d.utilisation:
        parts.append("busy on active PEs " + ", ".join(f"{u} {v:.0%}" for u, v in d.utilisation[:3]))
    if d.stalls:
        parts.append("top stalls " + ", ".join(f"{s} {v:.0%}" for s, v in d.stalls))
    return "; ".join(parts)


# --- sections shared by the terminal and the prompt --------------------------------------------------
def _header(p: Profile) -> str:
    n = len(p.launches) or len(p.kernels)
    return f"{p.target} on {p.device}: {fmt_time(p.time_s)} per forward, {n} launch(es)"


def _roofline(p: Profile) -> str | None:
    rf = p.roofline
    if not rf:
        return None
    frac = rf.get("fraction")
    return (
        f"reference roofline: {rf.get('bound', '?')}-bound, {fmt_si(rf.get('bytes'), 'B')} min traffic, "
        f"{fmt_si(rf.get('flops'), 'FLOP')}, limit {fmt_time(rf.get('time_s'))}"
        + (f", this candidate reaches {100 * frac:.1f}% of it" if frac is not None else "")
    )


def _bottleneck(d: Diagnosis, evidence: bool = True) -> list[str]:
    b = d.bottleneck
    if b is None:
        return ["measured bottleneck: unknown (no counters)"]
    out = [f"measured bottleneck: {b.name} ({b.kind}, {b.category}-type)"]
    if evidence:
        out += [f"  - {e}" for e in b.evidence]
    return out


def _launch_rows(p: Profile) -> list[str]:
    rows = []
    total = p.time_s or 1.0
    for s in p.launches:
        idle = s.pes_total - s.pes_used
        row = (
            f"  {s.kernel[:28]:<28} grid {str(tuple(s.grid)):<14} {s.programs:>6} programs "
            f"{s.pes_used:>3}/{s.pes_total} PEs{f' ({idle} idle)' if idle else ''}  "
            f"{fmt_time(s.time_s)} ({s.time_s / total:.0%})  "
            f"busiest {s.busiest_unit} {fmt_pct(s.busiest_util)}"
        )
        rows.append(row + (f"  imbalance {s.imbalance:.2f}x" if s.imbalance > 1.2 else ""))
    return rows


def _unit_rows(p: Profile, top: int | None) -> list[str]:
    rows = [f"  {'unit':<6} {'busy(active PEs)':>16} {'busy(chip)':>10} {'commands':>9}  top stall"]
    for u in p.units[:top]:
        stalls = {k: v for k, v in p.stall_shares.items() if k.startswith(u.name + ":")}
        top_stall = max(stalls.items(), key=lambda kv: kv[1], default=None)
        st = f"{top_stall[0].split(':', 1)[1]} {top_stall[1]:.0%}" if top_stall else "-"
        rows.append(
            f"  {u.name:<6} {fmt_pct(u.utilization_active):>16} {fmt_pct(u.utilization):>10} "
            f"{u.commands if u.commands is not None else '-':>9}  {st}"
        )
    return rows


def _memory_rows(p: Profile) -> list[str]:
    rows = []
    for lv in p.memory:
        peak = f", {fmt_pct(lv.utilization)} of {fmt_si(lv.peak_bw, 'B/s')}" if lv.peak_bw else ""
        comp = (
            f"; compulsory {fmt_si(lv.compulsory_bytes, 'B')} ({lv.bytes_total / lv.compulsory_bytes:.2f}x)"
            if lv.compulsory_bytes
            else ""
        )
        hit = f", hit rate {fmt_pct(lv.hit_rate)}" if lv.hit_rate is not None else ""
        rows.append(
            f"  {lv.level:<12} read {fmt_si(lv.bytes_read, 'B')}, written {fmt_si(lv.bytes_written, 'B')}, "
            f"{fmt_si(lv.achieved_bw, 'B/s')}{peak}{hit}{comp}"
        )
    return rows


def _stall_rows(p: Profile, top: int | None) -> list[str]:
    shares = p.stall_shares or {}
    items = sorted(shares.items(), key=lambda kv: -kv[1])[:top] if shares else list(p.stalls.items())[:top]
    rows = []
    for reason, share in items:
        info = stall_info(reason)
        rows.append(f"  {reason} {share:.0%}: {info.meaning} -> {info.remedy}")
    return rows


def _line_rows(p: Profile, top: int | None, text_width: int = 70) -> list[str]:
    rows = []
    for ln in p.lines[:top]:
        nbytes = sum(ln.bytes.values())
        waits = ", ".join(f"{k} {v:.0f}" for k, v in sorted(ln.stall_cycles.items(), key=lambda kv: -kv[1]))
        rows.append(
            f"  {ln.share:5.1%} {ln.location:<16} {ln.commands:>5} cmds {fmt_si(nbytes, 'B'):>9}  "
            f"{'/'.join(o.split(':')[1] for o in ln.ops)[:30]:<30} | {ln.text[:text_width]}"
            + (f"  (waits: {waits})" if waits else "")
        )
    return rows


def _occupancy_line(p: Profile) -> str | None:
    idle = (p.metric("idle_pe_pct") or 0.0) / 100
    if p.launches:
        per = ", ".join(f"{s.kernel} {s.pes_used} of {s.pes_total}" for s in p.launches[:4])
        line = f"grid vs PEs (PEs with work): {per}; {idle:.0%} of PE-time idle"
    else:
        used, total = p.metric("pes_used"), p.metric("pes_total")
        if not used or not total:
            return None
        line = f"grid vs PEs: at most {used:.0f} of {total:.0f} PEs have work; {idle:.0%} of PE-time idle"
    if idle >= IDLE_PES:
        line += " -- the grid is too small for the chip"
    return line


# --- audiences -----------------------------------------------------------------------------------
def terminal(p: Profile, *, top: int = 8, full: bool = False) -> str:
    """The profile for a person at a terminal."""
    n = None if full else top
    d = diagnose_profile(p)
    lines = ["profile: " + _header(p) + (f"  [{', '.join(p.sources)}]" if p.sources else "")]
    for extra in (_roofline(p), _occupancy_line(p)):
        if extra:
            lines.append("  " + extra)
    lines += ["  " + x for x in _bottleneck(d)]
    if p.launches:
        lines += ["  launches:"] + _launch_rows(p)
    elif p.kernels:
        lines.append(
            "  kernels: " + ", ".join(f"{k.name} x{k.calls} {fmt_time(k.total_s)}" for k in p.kernels[:n])
        )
    if p.units:
        lines += ["  units:"] + _unit_rows(p, n)
    if p.memory:
        lines += ["  memory:"] + _memory_rows(p)
    if p.stalls:
        lines += ["  stalls (share of the unit's time on active PEs):"] + _stall_rows(p, n)
    if p.lines:
        lines += ["  hottest source lines (share of unit busy time):"] + _line_rows(
            p, 5 if not full else None
        )
    shown = {k: v for k, v in p.metrics.items() if full or k in _KEY_METRICS}
    if shown:
        lines.append("  metrics: " + ", ".join(f"{k}={fmt_metric(k, v)}" for k, v in shown.items()))
    lines += [f"  note: {x}" for x in p.notes]
    return "\n".join(lines)


_KEY_METRICS = (
    "achieved_dram_bw",
    "dram_bw_pct",
    "achieved_flops",
    "compute_pct",
    "occupancy_pct",
    "l2_hit_rate_pct",
    "sm_throughput_pct",
    "launches",
    "dram_excess",
)


def source_view(p: Profile, top: int | None = None) -> str:
    """Per Triton source line: share of busy cycles, cycles, commands, bytes per level, waits."""
    if not p.lines:
        return "source view: no per-line attribution (no command tags in this profile)"
    out = [f"{'share':>6} {'cycles':>9} {'cmds':>5} {'bytes':>28}  {'waits (cycles)':<32} source"]
    for ln in p.lines[:top]:
        nbytes = ", ".join(f"{k} {fmt_si(v, 'B')}" for k, v in ln.bytes.items()) or "-"
        waits = ", ".join(f"{k} {v:.0f}" for k, v in ln.stall_cycles.items()) or "-"
        out.append(
            f"{ln.share:6.1%} {ln.cycles:9.0f} {ln.commands:5d} {nbytes:>28}  {waits:<32} "
            f"{ln.location} [{ln.kernel}] {ln.text}"
        )
    return "\n".join(out)


def prompt(p: Profile, *, parent: Profile | None = None, detail: int = PROMPT_DETAIL_MAX) -> str:
    """The profile section of a prompt, measured on this candidate; `detail` 0..3 (less is shorter)."""
    d = diagnose_profile(p)
    if detail <= 0:
        return diagnosis_line(d)
    out = [f"- {_header(p)}"]
    occ = _occupancy_line(p)
    if occ:
        out.append(f"- {occ}")
    out += ["- " + x if not x.startswith(" ") else x for x in _bottleneck(d, evidence=detail >= 1)]
    if d.remedies:
        kinds = [k for k, _ in d.remedies[: 2 if detail < 3 else 3]]
        out.append("- what usually helps here: " + "; ".join(REMEDIES[k] for k in kinds if k in REMEDIES))
    if dict(d.protect).get("parallelism") and d.bottleneck is not None and d.bottleneck.kind != "occupancy":
        out.append("- keep the grid at least as large as the PEs: fewer programs would leave PEs idle")
    if detail >= 2:
        if p.launches and len(p.launches) > 1 or detail >= 3:
            out += ["- launches:"] + _launch_rows(p)
        if p.units:
            out += ["- units:"] + _unit_rows(p, 4 if detail < 3 else None)
        if p.memory:
            out += ["- memory traffic:"] + _memory_rows(p)
        if p.stalls:
            out += ["- stalls (share of that unit's time):"] + _stall_rows(p, 3 if detail < 3 else 5)
        if p.lines:
            out += ["- hottest Triton source lines:"] + _line_rows(p, 3 if detail < 3 else 6)
    if parent is not None and detail >= 1:
        out += ["- change from the parent:"] + [
            f"  {c}" for c in changes(parent, p)[: 3 if detail < 3 else 8]
        ]
    return "\n".join(out)


def reference_section(roofline: dict[str, Any], shapes: str = "") -> str:
    """For drafting prompts: the reference's roofline, the problem's shapes, bytes and FLOPs."""
    if not roofline:
        return "(no roofline for this problem)" + (f"\n- shapes: {shapes}" if shapes else "")
    out = [
        f"- minimum DRAM traffic {fmt_si(roofline.get('bytes'), 'B')}, "
        f"{fmt_si(roofline.get('flops'), 'FLOP')}",
        f"- roofline limit {fmt_time(roofline.get('time_s'))} "
        f"({roofline.get('bound', '?')}-bound on this machine)",
    ]
    if shapes:
        out.insert(0, f"- shapes: {shapes}")
    return "\n".join(out)


def html(p: Profile) -> str:
    """The profile as HTML tables (the run report)."""
    esc = _html.escape
    d = diagnose_profile(p)

    def table(head: list[str], rows: list[list[Any]]) -> str:
        h = "".join(f"<th>{esc(x)}</th>" for x in head)
        body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{h}</tr>{body}</table>"

    parts = [f"<p>{esc(_header(p))}</p>"]
    parts.append("<ul>" + "".join(f"<li>{esc(x.strip(' -'))}</li>" for x in _bottleneck(d)) + "</ul>")
    if p.launches:
        parts.append(
            table(
                ["kernel", "grid", "programs", "PEs used", "time", "busiest unit"],
                [
                    [
                        s.kernel,
                        s.grid,
                        s.programs,
                        f"{s.pes_used}/{s.pes_total}",
                        fmt_time(s.time_s),
                        f"{s.busiest_unit} {fmt_pct(s.busiest_util)}",
                    ]
                    for s in p.launches
                ],
            )
        )
    if p.units:
        parts.append(
            table(
                ["unit", "busy (active PEs)", "busy (chip)", "commands"],
                [
                    [u.name, fmt_pct(u.utilization_active), fmt_pct(u.utilization), u.commands]
                    for u in p.units
                ],
            )
        )
    if p.memory:
        parts.append(
            table(
                ["level", "read", "written", "bandwidth", "of peak", "compulsory"],
                [
                    [
                        m.level,
                        fmt_si(m.bytes_read, "B"),
                        fmt_si(m.bytes_written, "B"),
                        fmt_si(m.achieved_bw, "B/s"),
                        fmt_pct(m.utilization),
                        fmt_si(m.compulsory_bytes, "B") if m.compulsory_bytes else "-",
                    ]
                    for m in p.memory
                ],
            )
        )
    if p.stalls:
        parts.append("<ul>" + "".join(f"<li>{esc(r.strip())}</li>" for r in _stall_rows(p, 6)) + "</ul>")
    if p.lines:
        parts.append(
            table(
                ["share", "line", "commands", "source"],
                [[f"{ln.share:.1%}", ln.location, ln.commands, ln.text] for ln in p.lines[:10]],
            )
        )
    return "\n".join(parts)
