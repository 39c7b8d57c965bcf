"""The simulator's statistics, declared once: every counter a timing run produces, with its name, unit
and meaning (the way gem5 registers each stat), and the number formatting every profile text uses.

`mtia_sim.counters` (`Counters.to_dict`, `UnitCounters.to_dict`, `Roofline.to_dict`) and the SRAM
cache (`CacheStats.to_dict`) emit exactly the keys declared here (tests/profile/test_stats.py checks
it); `mtia_sim.report` and `kegen.profiling` (whose `METRICS` are built from `LAUNCH` and `LEVELS`)
read them by these names. The stall reasons the timing model records are declared in `STALLS` with
what each means and what usually helps, for the simulator's report and for kegen's prompts alike.

Only the standard library is imported: kegen's profile schema imports this module without paying for
the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Stat:
    """A self-describing statistic: name, unit of measure and what it measures."""

    name: str
    unit: str
    description: str

    def format(self, value: float) -> str:
        """`value` written in this stat's unit (`fmt_value`)."""
        return fmt_value(value, self.unit)


def table(text: str) -> dict[str, Stat]:
    """A registry from lines of `name unit description` (name and unit are single words), in order."""
    rows = [line.split(maxsplit=2) for line in text.strip().splitlines()]
    return {name: Stat(name, unit, desc) for name, unit, desc in rows}


# --- what the chip is made of ------------------------------------------------------------------
UNITS: dict[str, str] = {
    "CORE": "RISC-V control cores: scalar code, address math, command issue",
    "DMA": "DMA engine: moves tiles between DRAM/SRAM and the local store",
    "DPE": "dot-product engine: matrix multiplies (tl.dot)",
    "SIMD": "vector unit: elementwise math, exp, compares",
    "RED": "reduction engine: row reductions (tl.sum, tl.max), cross-PE accumulation",
    "MLU": "memory layout unit: transposes and layout changes",
}
LEVELS: dict[str, str] = {
    "dram": "off-chip DRAM",
    "sram": "on-chip SRAM shared by all PEs",
    "local": "each PE's local store (scratchpad)",
    "remote_local": "another PE's local store, over the network on chip",
}

# --- the counters of one launch (`Counters.to_dict()`) -------------------------------------------
LAUNCH: dict[str, Stat] = table(
    """
machine            name    the machine description the launch ran on (mtia-2i, ...)
clock_hz           Hz      the PEs' clock frequency
kernel_cycles      cycle   cycles from the first program's start to the last command's end
launch_cycles      cycle   cycles of launch overhead before the kernel starts (host to device)
cycles             cycle   kernel_cycles + launch_cycles
kernel_seconds     s       time inside the kernel (launch overhead excluded)
seconds            s       time of the launch (launch overhead included)
flops              FLOP    arithmetic operations executed (a multiply-add counts 2)
achieved_flops     FLOP/s  flops / kernel_seconds
bandwidth          table   per memory level (`LEVELS`): the `BANDWIDTH` stats
roofline           table   where the launch sits on the DRAM roofline: the `ROOFLINE` stats
stall_reasons      cycle   idle stall cycles by `UNIT:reason` (`STALLS`), summed over PEs, no queueing
sram_cache         table   what the SRAM did as a cache or resident store: the `SRAM_CACHE` stats
core_time          cycle   every cycle of every core that ran programs: busy, stall:<reason>, idle
core_slots         count   (PE, core) pairs that ran programs
queue_wait_cycles  cycle   per unit: cycles commands queued behind earlier commands (`unit_busy`)
totals             table   per unit (`UNITS`): the `UNIT` stats summed over the PEs
pes                table   per PE that ran programs: row, col, bandwidth per level, its `UNIT` stats
"""
)

# --- one unit, on one PE or summed over PEs (`UnitCounters.to_dict()`) --------------------------
UNIT: dict[str, Stat] = table(
    """
unit            name    the unit (`UNITS`)
busy_cycles     cycle   cycles with at least one command in flight (CORE: program cycles)
utilization     ratio   busy_cycles over kernel_cycles times the unit's instances
commands        count   commands executed (CORE: programs run)
flops           FLOP    arithmetic operations executed (a multiply-add counts 2)
elements        count   elements processed (CORE: instructions retired)
achieved_flops  FLOP/s  flops / kernel_seconds
peak_flops      FLOP/s  the unit's peak for its own mix of commands (None without FLOPs)
bytes_read      B       bytes read per memory level (as served: SRAM cache hits count as SRAM)
bytes_written   B       bytes written per memory level
stall_cycles    cycle   cycles its commands (or the core) waited, by reason (`STALLS`)
"""
)

# --- one memory level (`Counters.bandwidth[level]`) ---------------------------------------------
BANDWIDTH: dict[str, Stat] = table(
    """
bytes        B      bytes read and written at this level
achieved_bw  B/s    bytes / kernel_seconds
peak_bw      B/s    the level's peak bandwidth (local, remote_local: over the active PEs)
fraction     ratio  achieved_bw / peak_bw
"""
)

# --- the roofline position (`Roofline.to_dict()`) ------------------------------------------------
ROOFLINE: dict[str, Stat] = table(
    """
flops                 FLOP    arithmetic operations executed
dram_bytes            B       bytes read and written in DRAM
arithmetic_intensity  FLOP/B  flops per DRAM byte (None without DRAM traffic)
compute_roof          FLOP/s  the DPE/SIMD/RED peak for this launch's mix of commands
dram_bw               B/s     the DRAM's peak bandwidth
ridge_point           FLOP/B  the arithmetic intensity where the two roofs meet
attainable_flops      FLOP/s  min(compute_roof, arithmetic_intensity x dram_bw)
achieved_flops        FLOP/s  flops / kernel_seconds
fraction_of_roofline  ratio   achieved / attainable (no FLOPs: achieved / peak DRAM bandwidth)
bound                 name    compute, memory (also: no FLOPs but DRAM traffic) or none
"""
)

# --- the SRAM as a cache or resident store (`CacheStats.to_dict()`) ------------------------------
SRAM_CACHE: dict[str, Stat] = table(
    """
mode                name   off, cache (memory-side cache) or resident (tensors placed in SRAM)
capacity_bytes      B      the SRAM's capacity
line_bytes          B      the cache line size
read_hit_bytes      B      DRAM-addressed bytes read that the SRAM served
read_miss_bytes     B      DRAM-addressed bytes read that went to DRAM
write_bytes         B      DRAM-addressed bytes written
hit_lines           count  lines read that hit
miss_lines          count  lines read that missed
evicted_lines       count  lines evicted to make room
hit_rate            ratio  read_hit_bytes over all DRAM-addressed bytes read (None without reads)
placed_read_lines   count  resident mode: lines placed in the SRAM by a read
placed_write_lines  count  resident mode: lines placed by a write (written back after)
placement_bytes     B      resident mode: bytes moved between DRAM and SRAM around the launch
"""
)


# --- stall reasons -----------------------------------------------------------------------------
@dataclass(frozen=True)
class StallReason:
    """What one stall reason means and what usually helps."""

    name: str
    meaning: str
    remedy: str


# Command waits (`UnitCounters.stall_cycles`, on the unit that waited)
WAIT_UNIT = "unit_busy"
WAIT_DEPENDENCY = "dependency"
WAIT_BANDWIDTH = "shared_bandwidth"

# A reason is `UNIT:why`; core stalls name the unit waited on (`CORE:fence_wait_DMA`), so a reason is
# matched on its `why`, then on shorter prefixes of it (`stall_reason`). Each entry: the name, what it
# means, what usually helps.
STALLS: dict[str, StallReason] = {
    name: StallReason(name, meaning.strip(), remedy.strip())
    for name, meaning, remedy in (
        block.strip().splitlines()
        for block in """
dependency
    the unit idles waiting for a command it depends on (usually a DMA load into the local store)
    overlap the producer with the consumer: multi-buffer (num_stages) or make the producer faster

shared_bandwidth
    transfers ran slower than alone because other PEs shared the DRAM/SRAM bandwidth
    move fewer bytes (fuse passes, reuse tiles); the kernel is near the memory roof

unit_busy
    commands queued behind earlier commands on the same busy unit
    that unit is the limiter: give it less or larger work, or spread work over more PEs

fence_wait
    the control core waits at a fence for a unit to finish
    fence less often: prefetch the next tile while computing (multi-buffering)

end_wait
    programs end waiting for their last commands (typically the final DMA store)
    overlap the tail with other programs' work; more programs per PE hide it

queue_full
    the core cannot issue: the unit's command queue is full (that unit is busy)
    the named unit is the limiter: fewer, larger commands for it, or more PEs sharing the work

scalar_mem
    the control core waits on scalar loads or stores to memory
    keep scalars in registers; load vectors with tl.load blocks instead of element by element

cache_miss
    accesses missed the SRAM cache and went to DRAM
    reuse tiles while they are on chip (tile order, larger tiles)

replacement
    the PE waited while a new job (program) was loaded
    fewer, longer programs per PE amortise the switch
""".split("\n\n")
    )
}


def stall_reason(reason: str) -> StallReason | None:
    """The declared reason a stall (`UNIT:why` or a bare `why`) is: its `why`, then shorter prefixes
    of it (`fence_wait_DMA` -> `fence_wait`), then a declared name inside it (`sram_cache_miss`);
    None when it names none."""
    unit, sep, why = reason.partition(":")
    parts = (why if sep else unit).strip().split("_")
    for n in range(len(parts), 0, -1):
        key = "_".join(parts[:n])
        if key in STALLS:
            return STALLS[key]
    whole = "_".join(parts)
    return next((s for key, s in STALLS.items() if key in whole), None)


# --- formatting: how every profile text writes a value -------------------------------------------
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_si(x: float | None, unit: str, *, spec: str = ".2f", small: str = ".0f", missing: str = "?") -> str:
    """`x` with an SI prefix (`1.50 GB/s`); `spec` above 1000, `small` below; `missing` for None,
    inf or NaN."""
    if x is None or not math.isfinite(x):
        return missing
    for scale, prefix in _SI:
        if abs(x) >= scale:
            return f"{x / scale:{spec}} {prefix}{unit}"
    return f"{x:{small}} {unit}"


def fmt_time(t: float | None, missing: str = "?") -> str:
    """Seconds as `1.234 ms` from a millisecond up, else `12.34 us`."""
    if t is None:
        return missing
    return f"{t * 1e3:.3f} ms" if t >= 1e-3 else f"{t * 1e6:.2f} us"


def fmt_pct(x: float | None, spec: str = ".0f", missing: str = "-") -> str:
    """A fraction (0..1) as a percentage: `fmt_pct(0.256)` is `26%`."""
    return missing if x is None else f"{100 * x:{spec}}%"


def fmt_value(v: float, unit: str) -> str:
    """A value in its declared unit: % and ratios with fixed decimals, seconds by `fmt_time`, bytes and
    FLOPs with an SI prefix, anything else as `:g`."""
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "s":
        return fmt_time(v)
    if unit in ("B", "B/s", "FLOP", "FLOP/s"):
        return fmt_si(v, unit)
    if unit == "ratio":
        return f"{v:.2f}"
    return f"{v:g}"
