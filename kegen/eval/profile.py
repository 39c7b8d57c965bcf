"""One profile format for every target: kernels, units, key metrics, stalls, roofline.

Built from the simulator's counters on mtia (`from_mtia_launches`), from the torch profiler's kernel
table and ncu's metrics on GPUs (`kegen.eval.profile_gpu`), from host timing on cpu. `to_dict()`
is JSON; `format_text()` is what a person or the next prompt reads.

Common metric keys (absent when unknown): time_s, dram_bytes, achieved_dram_bw, dram_bw_pct,
achieved_flops, compute_pct, occupancy_pct, l2_hit_rate_pct, sm_throughput_pct, launches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class KernelStat:
    """One kernel (by name) within a forward."""

    name: str
    calls: int
    total_s: float
    share: float = 0.0  # of the forward's kernel time
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class UnitStat:
    """One hardware unit (mtia: DMA, DPE, SIMD, ...; GPU: SM/memory throughput from ncu)."""

    name: str
    busy_cycles: float | None = None
    utilization: float | None = None  # 0..1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Profile:
    """The unified profile of one forward of a candidate."""

    target: str
    device: str
    time_s: float | None = None
    kernels: list[KernelStat] = field(default_factory=list)
    units: list[UnitStat] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> share (0..1) or cycles
    roofline: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # which tools produced it
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # tool-specific detail (counters, ncu rows)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        data = dict(data)
        data["kernels"] = [KernelStat(**k) for k in data.get("kernels", [])]
        data["units"] = [UnitStat(**u) for u in data.get("units", [])]
        return cls(**data)

    def format_text(self, *, top: int = 8, full: bool = False) -> str:
        """Readable summary: time, roofline position, kernels, units, key metrics, top stalls."""
        lines = [
            f"profile: target {self.target} on {self.device}"
            + (f", {_t(self.time_s)} per forward" if self.time_s else "")
            + (f"  [{', '.join(self.sources)}]" if self.sources else "")
        ]
        rf = self.roofline
        if rf:
            frac = rf.get("fraction")
            lines.append(
                f"  roofline: {rf.get('bound', '?')}-bound, {_si(rf.get('bytes'), 'B')} min traffic, "
                f"{_si(rf.get('flops'), 'FLOP')}, limit {_t(rf.get('time_s'))}"
                + (f", reached {100 * frac:.1f}% of it" if frac is not None else "")
            )
        if self.metrics:
            shown = {k: v for k, v in self.metrics.items() if full or k in _KEY_METRICS}
            lines.append("  metrics: " + ", ".join(f"{k}={_fmt_metric(k, v)}" for k, v in shown.items()))
        if self.kernels:
            lines.append(f"  {'kernel':<40} {'calls':>5} {'total':>11} {'share':>6}")
            for k in sorted(self.kernels, key=lambda k: -k.total_s)[: None if full else top]:
                lines.append(f"  {k.name[:40]:<40} {k.calls:>5} {_t(k.total_s):>11} {100 * k.share:>5.1f}%")
        if self.units:
            lines.append(f"  {'unit':<10} {'busy cycles':>12} {'util':>6}")
            for u in self.units[: None if full else top]:
                util = f"{100 * u.utilization:5.1f}%" if u.utilization is not None else "     -"
                busy = f"{u.busy_cycles:12.0f}" if u.busy_cycles is not None else f"{'-':>12}"
                lines.append(f"  {u.name:<10} {busy} {util}")
        if self.stalls:
            top_stalls = sorted(self.stalls.items(), key=lambda kv: -kv[1])[: top if not full else None]
            lines.append("  top stalls: " + ", ".join(f"{r} {_fmt_stall(v)}" for r, v in top_stalls))
        lines.extend(f"  note: {n}" for n in self.notes)
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
)


def _fmt_metric(name: str, v: float) -> str:
    if name.endswith("_pct"):
        return f"{v:.1f}%"
    if name.endswith("_bw"):
        return _si(v, "B/s")
    if name.endswith("flops"):
        return _si(v, "FLOP/s")
    if name.endswith("_s"):
        return _t(v)
    return f"{v:g}"


def _fmt_stall(v: float) -> str:
    return f"{100 * v:.1f}%" if v <= 1.0 else f"{v:.0f} cyc"


def _t(t: float | None) -> str:
    if t is None:
        return "?"
    return f"{t * 1e3:.3f} ms" if t >= 1e-3 else f"{t * 1e6:.2f} us"


def _si(x: float | None, unit: str) -> str:
    if x is None:
        return "?"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def from_mtia_launches(launches: list[Any], machine: str, roofline: dict[str, Any]) -> Profile:
    """Profile of one forward on mtia from the driver's LaunchRecords (kernel, grid, result)."""
    total = sum(float(r.result.seconds) for r in launches) or 1.0
    kernels: dict[str, KernelStat] = {}
    units: dict[str, UnitStat] = {}
    stalls: dict[str, float] = {}
    metrics: dict[str, float] = {"launches": float(len(launches))}
    flops = 0.0
    dram_bytes = 0.0
    peak_bw = None
    for rec in launches:
        secs = float(rec.result.seconds)
        k = kernels.setdefault(rec.kernel, KernelStat(rec.kernel, 0, 0.0, extra={"grid": list(rec.grid)}))
        k.calls += 1
        k.total_s += secs
        c = _counters_dict(getattr(rec.result, "counters", None))
        flops += float(c.get("flops", 0) or 0)
        dram = (c.get("bandwidth") or {}).get("dram") or {}
        dram_bytes += float(dram.get("bytes", 0) or 0)
        peak_bw = dram.get("peak_bw", dram.get("peak", peak_bw))
        for name, u in (c.get("totals") or {}).items():
            stat = units.setdefault(name, UnitStat(name, 0.0, 0.0, extra={"flops": 0}))
            stat.busy_cycles = (stat.busy_cycles or 0.0) + float(u.get("busy_cycles", 0.0))
            stat.utilization = (stat.utilization or 0.0) + float(u.get("utilization", 0.0)) * secs / total
            stat.extra["flops"] += int(u.get("flops", 0) or 0)
        for reason, cycles in (c.get("stall_reasons") or {}).items():
            stalls[reason] = stalls.get(reason, 0.0) + float(cycles)
    for k in kernels.values():
        k.share = k.total_s / total
    metrics.update(
        time_s=total, dram_bytes=dram_bytes, achieved_dram_bw=dram_bytes / total, achieved_flops=flops / total
    )
    if peak_bw:
        metrics["dram_bw_pct"] = 100 * dram_bytes / total / float(peak_bw)
    if roofline.get("peak_flops"):
        metrics["compute_pct"] = 100 * flops / total / float(roofline["peak_flops"])
    raw: dict[str, Any] = {}
    if launches:
        raw["last_launch_counters"] = _counters_dict(getattr(launches[-1].result, "counters", None))
    return Profile(
        target="mtia",
        device=machine,
        time_s=total,
        kernels=list(kernels.values()),
        units=sorted(units.values(), key=lambda u: -(u.utilization or 0.0)),
        metrics=metrics,
        stalls=dict(sorted(stalls.items(), key=lambda kv: -kv[1])),
        roofline=roofline,
        sources=["mtia_sim counters"],
        raw=raw,
    )


def _counters_dict(counters: Any) -> dict[str, Any]:
    if counters is None:
        return {}
    if hasattr(counters, "to_dict"):
        return dict(counters.to_dict())
    return dict(counters)


def from_host_timing(time_s: float, roofline: dict[str, Any]) -> Profile:
    """Target cpu: only the time and the roofline position."""
    return Profile(
        target="cpu",
        device="host",
        time_s=time_s,
        roofline=roofline,
        sources=["host timer"],
        notes=["target cpu has no hardware counters; use --target mtia or a GPU"],
    )
