"""Stall reasons: what each one means, the usual remedy, and the remedy kinds it points to.

MTIA reasons are `UNIT:why` (`SIMD:dependency`, `CORE:fence_wait_DMA`); GPU reasons are ncu's
warp-stall names (`long_scoreboard`). A reason is matched on its `why` part, then on shorter
prefixes of it (`fence_wait_DMA` -> `fence_wait`), so reasons the simulator adds later still get
the closest description. Remedy kinds are the vocabulary of `kegen.profiling.diagnosis.REMEDIES`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StallInfo:
    """One stall reason explained."""

    meaning: str
    remedy: str
    remedies: tuple[str, ...] = ()


_MTIA = {
    "dependency": StallInfo(
        "the unit idles waiting for a command it depends on (usually a DMA load into the local store)",
        "overlap the producer with the consumer: multi-buffer (num_stages) or make the producer faster",
        ("overlap",),
    ),
    "shared_bandwidth": StallInfo(
        "transfers ran slower than alone because other PEs shared the DRAM/SRAM bandwidth",
        "move fewer bytes (fuse passes, reuse tiles); the kernel is near the memory roof",
        ("fewer_bytes",),
    ),
    "unit_busy": StallInfo(
        "commands queued behind earlier commands on the same busy unit",
        "that unit is the limiter: give it less or larger work, or spread work over more PEs",
        ("bigger_commands", "parallelism"),
    ),
    "fence_wait": StallInfo(
        "the control core waits at a fence for a unit to finish",
        "fence less often: prefetch the next tile while computing (multi-buffering)",
        ("overlap",),
    ),
    "end_wait": StallInfo(
        "programs end waiting for their last commands (typically the final DMA store)",
        "overlap the tail with other programs' work; more programs per PE hide it",
        ("overlap", "parallelism"),
    ),
    "queue_full": StallInfo(
        "the core cannot issue: the unit's command queue is full (that unit is busy)",
        "the named unit is the limiter: fewer, larger commands for it, or more PEs sharing the work",
        ("bigger_commands", "parallelism"),
    ),
    "scalar": StallInfo(
        "the control core waits on scalar loads or stores to memory",
        "keep scalars in registers; load vectors with tl.load blocks instead of element by element",
        ("bigger_commands",),
    ),
    "cache_miss": StallInfo(
        "accesses missed the SRAM cache and went to DRAM",
        "reuse tiles while they are on chip (tile order, larger tiles)",
        ("fewer_bytes",),
    ),
    "replacement": StallInfo(
        "the PE waited while a new job (program) was loaded",
        "fewer, longer programs per PE amortise the switch",
        ("bigger_commands",),
    ),
}

_GPU = {
    "long_scoreboard": StallInfo(
        "warps wait for global/local memory loads (L1TEX)",
        "raise memory-level parallelism: more stages, larger tiles, coalesced loads",
        ("overlap", "fewer_bytes"),
    ),
    "short_scoreboard": StallInfo(
        "warps wait for shared memory or special-function results",
        "avoid shared-memory bank conflicts; fewer transcendental ops",
        ("cheaper_math",),
    ),
    "mio_throttle": StallInfo(
        "the memory input/output queue is full (shared memory or special math)",
        "fewer shared-memory instructions; wider accesses",
        ("bigger_commands",),
    ),
    "lg_throttle": StallInfo(
        "the local/global memory queue is full",
        "fewer, wider global accesses (vectorise)",
        ("bigger_commands",),
    ),
    "math_pipe_throttle": StallInfo(
        "a math pipe is saturated",
        "the kernel is compute-bound: cheaper math or tensor cores",
        ("cheaper_math",),
    ),
    "wait": StallInfo("fixed-latency dependency waits", "more independent work per warp (ILP)", ("overlap",)),
    "barrier": StallInfo(
        "warps wait at a barrier for the rest of the block", "balance work across warps", ("balance",)
    ),
    "not_selected": StallInfo(
        "eligible warps were not picked (the scheduler had others)", "none needed: issue is saturated"
    ),
    "no_instruction": StallInfo(
        "instruction cache misses or branch targets not ready",
        "smaller unrolled bodies",
        ("bigger_commands",),
    ),
    "drain": StallInfo("warps drain memory stores at exit", "fewer, larger stores", ("bigger_commands",)),
    "membar": StallInfo("warps wait at a memory barrier", "fewer fences or atomics", ("overlap",)),
    "dispatch_stall": StallInfo("the dispatcher stalled", "usually none: a pipeline hazard"),
    "branch_resolving": StallInfo("warps wait for branch targets", "fewer divergent branches"),
    "imc_miss": StallInfo("constant cache misses", "keep constants few and uniform"),
    "tex_throttle": StallInfo("the texture pipe is full", "fewer texture/global accesses", ("fewer_bytes",)),
    "sleeping": StallInfo("warps sleep (nanosleep or yield)", "none"),
    "selected": StallInfo("the warp issued an instruction (not a stall)", "none"),
}

UNKNOWN = StallInfo("a stall reason this version of kegen does not describe", "see the simulator's report")


def stall_info(reason: str) -> StallInfo:
    """The meaning and remedy of a stall reason (MTIA `UNIT:why` or an ncu warp-stall name)."""
    unit, sep, why = reason.partition(":")
    if not sep:
        why = unit
    why = why.strip()
    if why in _GPU:
        return _GPU[why]
    parts = why.split("_")
    for n in range(len(parts), 0, -1):
        key = "_".join(parts[:n])
        if key in _MTIA:
            return _MTIA[key]
    for key, info in _MTIA.items():  # a newer reason that names a known one (e.g. "sram_cache_miss")
        if key in why:
            return info
    return UNKNOWN


def stall_unit(reason: str) -> str:
    """The unit a stall reason concerns: the unit waited on for core stalls (`CORE:fence_wait_DMA`
    -> DMA), the stalled unit otherwise; '' when the reason names none."""
    unit, sep, why = reason.partition(":")
    if not sep:
        return ""
    tail = why.rsplit("_", 1)[-1]
    if unit == "CORE" and tail.isupper():
        return tail
    return unit
