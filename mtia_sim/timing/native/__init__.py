"""The native timing replay: the same model as `mtia_sim.timing.engine` (the reference), in C.

`replay(machine, traces, ...)` returns a `NativeRun` (the makespan, counters' raw sums and lazy
record builders), or None when the native library is off or unavailable, or the launch holds
something it does not take (an event subclass, a scalar access outside DRAM/SRAM, a malformed
span, a deadlock): the caller then replays in Python, which handles it or raises its own error, so
the two never give different answers silently. See docs/DECISIONS.md D13.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtia_sim import isa
from mtia_sim.events import CommandEvent, CoreEvent, EndEvent, FenceEvent, MemLevel, ProgramTrace
from mtia_sim.machine import MachineDescription
from mtia_sim.timing.native import loader
from mtia_sim.timing.sram_cache import SRAM_MODES, CacheStats

__all__ = ["NativeRun", "replay"]

LEVELS = (MemLevel.LOCAL, MemLevel.REMOTE_LOCAL, MemLevel.SRAM, MemLevel.DRAM)  # the C side's order
_SPEC = (CoreEvent, CommandEvent, FenceEvent, EndEvent, *LEVELS)
NWIDTH = 17
NCOLS_CMD, NCOLS_PROG, NCOLS_UNIT, NSTALL = 23, 29, 24, 19
STALL_NAMES = ("scalar_mem",) + tuple(f"{kind}_{unit}" for kind in ("queue_full", "fence_wait", "end_wait")
                                      for unit in ("ANY", "DMA", "DPE", "SIMD", "RED", "MLU"))


@functools.lru_cache(maxsize=32)
def _params(m: MachineDescription, sram_mode: str, capacity_bytes: int) -> np.ndarray:
    """The machine as the C side reads it (P_* in ktiming.h); read-only, cached per machine."""
    dpe = [m.dpe_flops_per_cycle_for_width(w) if w in m._rates_by_width[0] else 0.0 for w in range(NWIDTH)]
    simd = [m.simd_elements_per_cycle(w) if w in m._rates_by_width[1] else 0.0 for w in range(NWIDTH)]
    fixed = [m.core_cpi, m.command_issue_cycles, m.command_queue_depth, m.dma_max_in_flight,
             m.dram_latency_cycles, m.sram_latency_cycles, m.noc_hop_latency_cycles, m.dma_setup_cycles,
             m.dpe_setup_cycles, m.simd_setup_cycles, m.red_setup_cycles, m.mlu_setup_cycles,
             m.simd_transcendental_factor, m.red_elements_per_cycle, m.mlu_bytes_per_cycle,
             m.dram_bytes_per_cycle, m.sram_bytes_per_cycle, m.local_store_bytes_per_cycle,
             m.noc_link_bytes_per_cycle, m.dma_burst_bytes, m.dma_misaligned_penalty, m.pe_rows, m.pe_cols,
             m.num_pes, m.cores_per_pe, m.dpe_tile_m, m.dpe_tile_n, m.dpe_tile_k, SRAM_MODES.index(sram_mode),
             capacity_bytes // m.sram_line_bytes, m.sram_line_bytes, isa.DRAM_BASE // m.sram_line_bytes]
    out = np.array(fixed + dpe + simd, dtype=np.float64)
    out.flags.writeable = False
    return out


def _pointer(a: np.ndarray) -> Any:
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


@dataclass
class NativeRun:
    """What the native replay produced, as arrays (see api.c for the columns)."""

    makespan: float
    events: int
    commands: np.ndarray  # (commands in issue order, NCOLS_CMD)
    programs: np.ndarray  # (programs in start order, NCOLS_PROG)
    unit_counters: np.ndarray  # (num_pes, 6 units, NCOLS_UNIT)
    core_counters: np.ndarray  # (num_pes + 1, 5 + NSTALL) then [idle, cores used]
    timeline: np.ndarray  # (samples, 3)
    cache: CacheStats


def replay(machine: MachineDescription, traces: list[ProgramTrace], *, sram_mode: str = "cache",
           sram_cache_bytes: int | None = None) -> NativeRun | None:
    """Replay a launch natively; None when the Python replay must do it (see the module docstring)."""
    if sram_mode not in SRAM_MODES:
        return None  # the Python replay raises the error
    capacity = machine.sram_bytes if sram_cache_bytes is None else sram_cache_bytes
    if capacity < 0:
        return None
    lib = loader.load()
    if lib is None:
        return None
    trace = lib.kt_convert(traces, _SPEC, machine.num_pes, machine.cores_per_pe)
    if not trace:
        return None
    status = ctypes.c_int(0)
    params = _params(machine, sram_mode, capacity)
    handle = lib.kt_run(trace, _pointer(params), ctypes.byref(status))
    try:
        if status.value != 0:
            return None  # deadlock or out of memory: the Python replay reports it
        info = np.zeros(13)
        lib.kt_info(handle, _pointer(info))
        ncmd, nprog, ntl = int(info[2]), int(info[3]), int(info[4])
        cmds = np.empty((ncmd, NCOLS_CMD))
        progs = np.empty((nprog, NCOLS_PROG))
        units = np.empty((machine.num_pes, 6, NCOLS_UNIT))
        cores = np.empty((machine.num_pes + 1) * (5 + NSTALL) + 2)
        timeline = np.empty((ntl, 3))
        for fn, arr in ((lib.kt_commands, cmds), (lib.kt_programs, progs), (lib.kt_unit_counters, units),
                        (lib.kt_core_counters, cores), (lib.kt_timeline, timeline)):
            if arr.size:
                fn(handle, _pointer(arr))
        stats = CacheStats(sram_mode, capacity, machine.sram_line_bytes, read_hit_bytes=float(info[5]),
                           read_miss_bytes=float(info[6]), write_bytes=float(info[7]), hit_lines=int(info[8]),
                           miss_lines=int(info[9]), evicted_lines=int(info[10]),
                           placed_read_lines=int(info[11]), placed_write_lines=int(info[12]))
        return NativeRun(float(info[0]), int(info[1]), cmds, progs, units, cores, timeline, stats)
    finally:
        lib.kt_free(handle)
        lib.kt_trace_free(trace)
