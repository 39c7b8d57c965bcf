"""What bounds a launch, measured from its counters (not from the problem's roofline).

Rules, in order (thresholds are module constants):
1. DRAM bandwidth near its peak -> `memory` (dram);
2. launch overhead a large share of the time -> `launch_overhead`;
3. the busiest unit saturated on the active PEs while many PEs had no program -> `occupancy`
   (the grid is too small for the chip: the fix is more programs, not a faster unit);
4. a unit saturated over the active PEs -> `unit` (DMA: memory; DPE/SIMD/RED/MLU: compute;
   CORE: latency, i.e. control and issue overhead);
5. most PEs idle -> `occupancy`;
6. otherwise `latency`: no unit is busy enough, they wait on each other (dependency stalls).
"""

from __future__ import annotations

from typing import Any

from kegen.profiling.schema import Bottleneck, LaunchStat, Profile
from kegen.profiling.stalls import stall_info
from mtia_sim.stats import fmt_pct

DRAM_SATURATED = 0.6
UNIT_SATURATED = 0.6
OCCUPANCY_UNIT_BUSY = 0.4  # the active PEs are busy enough that more PEs would help
IDLE_PES = 0.25  # share of the chip's PEs without a program that makes occupancy the limiter
MOSTLY_IDLE = 0.5
OVERHEAD = 0.4
CATEGORY = {
    "DMA": "memory",
    "CORE": "latency",
    "DPE": "compute",
    "SIMD": "compute",
    "RED": "compute",
    "MLU": "compute",
    "SM": "compute",
    "DRAM": "memory",
}


def _top_stall(c: dict[str, Any], st: LaunchStat) -> str | None:
    reasons = c.get("stall_reasons") or {}
    if not reasons:
        return None
    reason, cycles = max(reasons.items(), key=lambda kv: float(kv[1] or 0))
    unit = reason.split(":", 1)[0]
    lanes = (st.cores_used if unit == "CORE" else st.pes_used) or 1
    k = float(c.get("kernel_cycles", 0.0) or 0.0)
    share = float(cycles) / (k * lanes) if k else 0.0
    return f"top stall {reason}: {fmt_pct(share)} of {unit} time ({stall_info(reason).meaning})"


def launch_bottleneck(st: LaunchStat, c: dict[str, Any]) -> Bottleneck:
    """The limiter of one mtia launch, with the evidence read from its counters."""
    idle = 1 - st.pes_used / st.pes_total if st.pes_total else 0.0
    bw = (c.get("bandwidth") or {}).get("dram") or {}
    dram_frac = float(bw.get("fraction") or 0.0)
    overhead = st.launch_overhead_s / st.time_s if st.time_s else 0.0
    unit, util = st.busiest_unit, st.busiest_util
    evidence = [
        f"grid {tuple(st.grid)} = {st.programs} programs on {st.pes_used} of {st.pes_total} PEs"
        + (f" ({st.pes_total - st.pes_used} PEs idle)" if st.pes_used < st.pes_total else ""),
        f"busiest unit {unit or '-'}: {fmt_pct(util)} busy on the active PEs",
        f"DRAM {fmt_pct(dram_frac)} of peak bandwidth",
    ]
    if st.imbalance > 1.2:
        evidence.append(f"load imbalance {st.imbalance:.2f}x (slowest PE over the mean)")
    if overhead > 0.1:
        evidence.append(f"launch overhead {fmt_pct(overhead)} of the launch")
    stall = _top_stall(c, st)
    if stall:
        evidence.append(stall)
    cat = CATEGORY.get(unit, "latency")
    if dram_frac >= DRAM_SATURATED:
        return Bottleneck("memory", "dram", "memory", dram_frac, st.kernel, evidence)
    if overhead >= OVERHEAD:
        return Bottleneck("launch_overhead", "launch", "latency", overhead, st.kernel, evidence)
    if idle >= IDLE_PES and util >= OCCUPANCY_UNIT_BUSY and st.programs < st.pes_total:
        return Bottleneck("occupancy", "idle PEs", cat, idle, st.kernel, evidence)
    if util >= UNIT_SATURATED:
        return Bottleneck("unit", unit, cat, util, st.kernel, evidence)
    if idle >= MOSTLY_IDLE:
        return Bottleneck("occupancy", "idle PEs", cat, idle, st.kernel, evidence)
    return Bottleneck("latency", "dependencies", "latency", 1 - util, st.kernel, evidence)


def profile_bottleneck(prof: Profile) -> Bottleneck | None:
    """The profile's measured limiter: the stored one, else read from units and metrics (GPUs)."""
    if prof.bottleneck is not None:
        return prof.bottleneck
    dram = (prof.metric("dram_bw_pct") or 0.0) / 100
    sm = (prof.metric("sm_throughput_pct") or 0.0) / 100
    occ = prof.metric("occupancy_pct")
    evidence = []
    if prof.metric("dram_bw_pct") is not None:
        evidence.append(f"DRAM {fmt_pct(dram)} of peak bandwidth")
    if prof.metric("sm_throughput_pct") is not None:
        evidence.append(f"SM throughput {fmt_pct(sm)} of peak")
    if occ is not None:
        evidence.append(f"achieved occupancy {occ:.0f}%")
    if not evidence:
        return None
    if dram >= DRAM_SATURATED and dram >= sm:
        return Bottleneck("memory", "dram", "memory", dram, evidence=evidence)
    if sm >= UNIT_SATURATED:
        return Bottleneck("unit", "SM", "compute", sm, evidence=evidence)
    if occ is not None and occ < 100 * IDLE_PES:
        return Bottleneck("occupancy", "low occupancy", "latency", 1 - occ / 100, evidence=evidence)
    return Bottleneck("latency", "stalls", "latency", 1 - max(dram, sm), evidence=evidence)
