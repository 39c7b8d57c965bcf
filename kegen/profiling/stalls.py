"""Stall reasons: what each one means, the usual remedy, and the remedy kinds it points to.

MTIA reasons are `UNIT:why` (`SIMD:dependency`, `CORE:fence_wait_DMA`), declared with their meaning
and remedy by the simulator (`mtia_sim.stats.STALLS`, which also matches a reason on shorter
prefixes of its `why`: `fence_wait_DMA` -> `fence_wait`); GPU reasons are ncu's warp-stall names
(`long_scoreboard`). Remedy kinds are the vocabulary of `kegen.profiling.diagnosis.REMEDIES`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtia_sim.stats import STALLS, stall_reason


@dataclass(frozen=True)
class StallInfo:
    """One stall reason explained."""

    meaning: str
    remedy: str
    remedies: tuple[str, ...] = ()


# MTIA reasons are declared, with meaning and remedy, where the simulator produces them
# (`mtia_sim.stats.STALLS`); here they get the remedy kinds the diagnosis weighs.
_MTIA_KINDS: dict[str, tuple[str, ...]] = {
    "dependency": ("overlap",),
    "shared_bandwidth": ("fewer_bytes",),
    "unit_busy": ("bigger_commands", "parallelism"),
    "fence_wait": ("overlap",),
    "end_wait": ("overlap", "parallelism"),
    "queue_full": ("bigger_commands", "parallelism"),
    "scalar_mem": ("bigger_commands",),
    "cache_miss": ("fewer_bytes",),
    "replacement": ("bigger_commands",),
}
_MTIA = {name: StallInfo(r.meaning, r.remedy, _MTIA_KINDS.get(name, ())) for name, r in STALLS.items()}

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
    why = (why if sep else unit).strip()
    if why in _GPU:
        return _GPU[why]
    declared = stall_reason(why)
    return _MTIA[declared.name] if declared is not None else UNKNOWN


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
