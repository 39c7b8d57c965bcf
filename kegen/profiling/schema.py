"""The profile schema shared by every target: one forward of a candidate, measured.

A `Profile` is built from the MTIA simulator's counters (`kegen.profiling.mtia`), from the torch
profiler and ncu on GPUs (`kegen.eval.trusted.profile_gpu`) or from host timing (`from_host_timing`). It
is stored as JSON in the graph store (`to_dict` / `from_dict`, tolerant of older shapes) and read
by the renderers (`kegen.profiling.render`), the diagnosis (`kegen.profiling.diagnosis`), the
prompts and the report. Every scalar metric is declared in `METRICS` (name, unit, description),
the way gem5 registers its statistics: those the simulator measures are built from its own
declarations (`mtia_sim.stats`, where the counters are produced); docs/PROFILE.md lists them.
Rendering lives in `kegen.profiling.render` (a `Profile` does not render itself).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mtia_sim.stats import BANDWIDTH, LAUNCH, LEVELS, UNITS, Stat, table

MetricDef = Stat  # one declaration type for the simulator's counters and the profile's metrics


def _summed(name: str, counter: str) -> MetricDef:
    """A simulator launch counter (`mtia_sim.stats.LAUNCH`) summed over the launches of one forward."""
    c = LAUNCH[counter]
    return MetricDef(name, c.unit, f"{c.description}, summed over the launches of one forward")


def _level_bytes(level: str) -> MetricDef:
    """Bytes at one memory level (`mtia_sim.stats.LEVELS`), from the counters' bandwidth table."""
    return MetricDef(f"{level}_bytes", BANDWIDTH["bytes"].unit, f"bytes read and written in {LEVELS[level]}")


# The profile's scalars. MTIA: those that are simulator counters are built from the simulator's own
# declarations (`mtia_sim.stats`, where they are produced); the rest are computed by
# `kegen.profiling.mtia` over the launches of a forward, from the problem's roofline, or measured by
# ncu on GPUs (`kegen.eval.trusted.profile_gpu`).
_FROM_SIMULATOR = (
    _summed("time_s", "seconds"),
    _summed("kernel_time_s", "kernel_seconds"),
    _summed("flops", "flops"),
    *(_level_bytes(level) for level in LEVELS),
)
METRICS: dict[str, MetricDef] = {
    **{m.name: m for m in _FROM_SIMULATOR},
    **table(
        """
launch_overhead_s      s       time spent launching kernels (launch_cycles / clock_hz) in one forward
launches               count   kernel launches in one forward
programs               count   grid points (Triton programs) launched in one forward
pes_used               count   processing elements that ran at least one program (largest launch)
pes_total              count   processing elements on the chip
idle_pe_pct            %       time-weighted share of the chip's PEs that had no program
load_imbalance         ratio   slowest active PE's busy time over the mean (1.0 = balanced)
achieved_flops         FLOP/s  flops / time_s
compute_pct            %       achieved FLOP/s over the chip's peak for this mix of commands
compulsory_dram_bytes  B       the problem's minimum DRAM traffic (inputs read once, outputs written once)
dram_excess            ratio   dram_bytes / compulsory_dram_bytes (1.0 = no redundant traffic)
achieved_dram_bw       B/s     dram_bytes / time_s
dram_bw_pct            %       achieved DRAM bandwidth over the peak
sram_hit_rate_pct      %       bytes read through the SRAM cache that hit, over all bytes read through it
occupancy_pct          %       GPU: achieved active warps over the maximum per SM (ncu)
sm_throughput_pct      %       GPU: SM throughput over its peak (ncu)
l2_hit_rate_pct        %       GPU: L2 sector hit rate (ncu)
roofline_fraction      ratio   the problem's roofline time over the measured time (1.0 = at the roof)
"""
    ),
}

UNIT_DESCRIPTIONS = {
    **UNITS,
    "SM": "GPU streaming multiprocessors (ncu sm__throughput)",
    "DRAM": "GPU device memory (ncu dram__throughput)",
}
LEVEL_DESCRIPTIONS = {**LEVELS, "l2": "GPU L2 cache"}


@dataclass
class KernelStat:
    """One kernel (by name) within a forward."""

    name: str
    calls: int
    total_s: float
    share: float = 0.0  # of the forward's kernel time
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class LaunchStat:
    """One launch: its grid against the chip's PEs, its time and what bounded it."""

    kernel: str
    grid: list[int]
    time_s: float
    programs: int = 0
    pes_used: int = 0
    pes_total: int = 0
    cores_used: int = 0
    cores_total: int = 0
    launch_overhead_s: float = 0.0
    imbalance: float = 1.0  # slowest active PE busy time / mean
    busiest_unit: str = ""  # over the active PEs
    busiest_util: float = 0.0  # 0..1, over the active PEs
    source_file: str = ""  # the kernel's source file name (from its command tags)
    tag_lines: list[int] = field(default_factory=list)  # command tag N -> source line tag_lines[N - 1]


@dataclass
class UnitStat:
    """One hardware unit (mtia: CORE, DMA, DPE, SIMD, RED, MLU; GPU: SM, DRAM from ncu)."""

    name: str
    busy_cycles: float | None = None
    utilization: float | None = None  # 0..1, over every instance on the chip
    utilization_active: float | None = None  # 0..1, over the PEs (cores) that had work
    commands: int | None = None
    flops: float | None = None
    stall_cycles: dict[str, float] = field(default_factory=dict)  # reason -> cycles (busy/stall split)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class MemoryLevelStat:
    """Traffic at one memory level (dram, sram, local, remote_local; GPU: dram, l2)."""

    level: str
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    achieved_bw: float | None = None  # B/s
    peak_bw: float | None = None  # B/s
    compulsory_bytes: float | None = None  # the problem's minimum (dram only)
    hit_rate: float | None = None  # 0..1, caches only

    @property
    def bytes_total(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def utilization(self) -> float | None:
        return self.achieved_bw / self.peak_bw if self.achieved_bw is not None and self.peak_bw else None


@dataclass
class SourceLine:
    """What one Triton source line cost: unit busy cycles, commands, bytes and waits (a source view)."""

    location: str  # file:line
    line: int
    text: str
    kernel: str
    cycles: float = 0.0  # unit busy cycles of its commands, summed over PEs
    share: float = 0.0  # of all unit busy cycles of the forward
    commands: int = 0
    bytes: dict[str, float] = field(default_factory=dict)  # level -> bytes moved
    stall_cycles: dict[str, float] = field(default_factory=dict)  # dependency / bandwidth / queue
    ops: list[str] = field(default_factory=list)  # command kinds issued (DMA_COPY, SIMD_BINARY, ...)


@dataclass
class Bottleneck:
    """The measured limiter of one forward: which unit or memory level, and the evidence."""

    kind: str  # unit | memory | occupancy | launch_overhead | latency | unknown
    name: str  # DMA, SIMD, dram, idle PEs, ...
    category: str  # memory | compute | latency (knowledge-base tags)
    score: float  # 0..1: how saturated the limiter is (or the idle share for occupancy)
    kernel: str = ""  # the launch it was read from (the longest)
    evidence: list[str] = field(default_factory=list)


@dataclass
class Profile:
    """The unified profile of one forward of a candidate."""

    target: str
    device: str
    time_s: float | None = None
    kernels: list[KernelStat] = field(default_factory=list)
    launches: list[LaunchStat] = field(default_factory=list)
    units: list[UnitStat] = field(default_factory=list)
    memory: list[MemoryLevelStat] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # keys of METRICS
    stalls: dict[str, float] = field(default_factory=dict)  # reason -> cycles (mtia) or share (GPU)
    stall_shares: dict[str, float] = field(default_factory=dict)  # reason -> share of that unit's time
    lines: list[SourceLine] = field(default_factory=list)  # hottest first
    bottleneck: Bottleneck | None = None
    roofline: dict[str, Any] = field(default_factory=dict)  # the problem's reference roofline
    sources: list[str] = field(default_factory=list)  # which tools produced it
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  # tool-specific detail (report text, ncu rows)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        """A profile from `to_dict` output, tolerant of older shapes and unknown keys."""
        data = {k: v for k, v in dict(data).items() if k in _FIELDS}
        data["kernels"] = [_build(KernelStat, k) for k in data.get("kernels") or []]
        data["launches"] = [_build(LaunchStat, x) for x in data.get("launches") or []]
        data["units"] = [_build(UnitStat, u) for u in data.get("units") or []]
        data["memory"] = [_build(MemoryLevelStat, m) for m in data.get("memory") or []]
        data["lines"] = [_build(SourceLine, x) for x in data.get("lines") or []]
        stalls = data.get("stalls") or {}
        if isinstance(stalls, list):  # older: [[reason, value], ...]
            stalls = {str(s[0]): float(s[1]) for s in stalls if isinstance(s, list | tuple) and len(s) >= 2}
        data["stalls"] = stalls
        b = data.get("bottleneck")
        data["bottleneck"] = _build(Bottleneck, b) if isinstance(b, dict) else None
        data.setdefault("target", "unknown")
        data.setdefault("device", "unknown")
        return cls(**data)

    def metric(self, name: str) -> float | None:
        """A metric by name (`METRICS`), or None when this profile does not have it."""
        v = self.metrics.get(name)
        return float(v) if isinstance(v, int | float) else None

    def unit(self, name: str) -> UnitStat | None:
        return next((u for u in self.units if u.name == name), None)

    def level(self, name: str) -> MemoryLevelStat | None:
        return next((m for m in self.memory if m.level == name), None)


_FIELDS = {f.name for f in fields(Profile)}


def _build(cls: Any, data: Any) -> Any:
    """`cls(**data)` keeping only the fields `cls` has (stored profiles may be older or newer)."""
    if not isinstance(data, dict):
        raise ValueError(f"profile entry for {cls.__name__} must be an object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def from_host_timing(time_s: float, roofline: dict[str, Any]) -> Profile:
    """Target cpu: only the time and the roofline position."""
    metrics = {"time_s": time_s}
    if roofline.get("fraction") is not None:
        metrics["roofline_fraction"] = float(roofline["fraction"])
    return Profile(
        target="cpu",
        device="host",
        time_s=time_s,
        metrics=metrics,
        roofline=roofline,
        sources=["host timer"],
        notes=["target cpu has no hardware counters; use --target mtia or a GPU"],
    )
