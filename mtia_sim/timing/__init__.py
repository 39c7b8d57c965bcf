"""The timing model: replays the functional model's program traces on the modelled chip.

`simulate(machine, traces)` returns a `TimingResult` with the total cycles (launch overhead +
makespan), every command's schedule, and the counters. Functional results never depend on it: it
only reads `mtia_sim.events` records. The model, with every figure from the machine description:

- Cores: programs on one (PE, core) run back to back (a launch is one job; job launch or job
  replacement is charged once, before the makespan); instructions cost `core_cpi` cycles each, a
  doorbell `command_issue_cycles`; scalar DRAM/SRAM accesses stall the core for the level's latency
  each and cross its shared bandwidth (`scalar_mem`). A core stalls when the target unit already
  holds `command_queue_depth` waiting commands, at a fence until its earlier commands on the fenced
  units are done, and at the end until all its commands are done.
- Command processor: one in-order queue per unit and PE, shared by the PE's cores; a command starts
  when its unit is free and every earlier command of the PE it conflicts with on local-store
  ranges (RAW, WAR, WAW) is done. The DMA unit may hold `dma_max_in_flight` commands at once
  (started in order, finishing in any order); the other units run one command at a time.
- Costs (`costs.py`): DMA = setup + latency of the farthest level (DRAM, SRAM, or NoC hops x hop
  latency) + a transfer through shared bandwidth; DPE = setup + 2*M*N*K (dims padded to the DPE
  tile) / FLOPs per cycle of the operand width; SIMD = setup + elements / lanes of that width
  (x the transcendental factor); RED and MLU alike. Misaligned DMA moves `dma_misaligned_penalty`
  more bytes; each atomic element at least one burst.
- Bandwidth (`fluid.py`): DRAM and SRAM are shared chip-wide, each local store per PE, each remote
  transfer has its NoC link; transfers in flight share them max-min fairly, re-solved whenever one
  starts or ends.
- SRAM (`sram_cache.py`): a memory-side LRU cache in front of DRAM (default), the scratchpad holding
  the launch's tensors ("resident": placement charged at DRAM bandwidth in the launch), or unused
  ("off").
- Not modelled (docs/MACHINE.md): local-store port contention between DMA and compute units, DRAM
  channel/bank effects, NoC link contention between transfers, cross-PE dependencies.
"""

from __future__ import annotations

from functools import partial

from mtia_sim.counters import build_counters
from mtia_sim.events import ProgramTrace
from mtia_sim.machine import MachineDescription
from mtia_sim.timing import native
from mtia_sim.timing.engine import Replay
from mtia_sim.timing.native import records
from mtia_sim.timing.result import CommandRecord, ProgramRecord, TimingResult, as_timing_result
from mtia_sim.timing.sram_cache import SRAM_MODES, CacheStats

__all__ = ["LAUNCH_KINDS", "SRAM_MODES", "CommandRecord", "ProgramRecord", "TimingResult", "as_timing_result",
           "simulate"]


LAUNCH_KINDS = ("launch", "replacement", "none")


def placement_cycles(machine: MachineDescription, stats: CacheStats) -> float:
    """Cycles to place a resident launch's tensors: lines read were copied in from DRAM before
    it, lines written are written back after it, at DRAM bandwidth (0 unless sram_mode is
    "resident"). Without it, `resident` would be a free resource a search could climb."""
    return stats.placement_bytes / machine.dram_bytes_per_cycle if stats.placement_bytes else 0.0


def simulate(machine: MachineDescription, traces: list[ProgramTrace], *, launch_overhead: bool = True,
             launch: str = "launch", sram_mode: str = "cache", sram_cache_bytes: int | None = None,
             use_native: bool = True) -> TimingResult:
    """Replay all programs of one launch (one job) concurrently; cycles, schedule and counters.

    Programs on the same (PE, core) run back to back in list order (a job's programs are work items
    of one job: no job replacement between them); different cores and PEs run concurrently.
    `launch` names the cost added before the makespan: "launch" (a job launch, the description's
    launch overhead), "replacement" (the job queued right behind another one: job replacement), or
    "none" (also `launch_overhead=False`). `sram_mode` is how the on-chip SRAM serves DRAM
    accesses ("cache", "resident", "off"; see `mtia_sim.timing.sram_cache`), `sram_cache_bytes` the
    part of the SRAM used as cache (default: all of it). `use_native=False` forces the Python
    replay (the reference); by default the native one (`mtia_sim.timing.native`, identical results)
    runs when it is available (see `KEGEN_SIM_NATIVE`).
    """
    if launch not in LAUNCH_KINDS:
        raise ValueError(f"launch must be one of {LAUNCH_KINDS}, got {launch!r}")
    if not launch_overhead or not traces or launch == "none":
        overhead = 0.0
    elif launch == "replacement":
        overhead = machine.job_replacement_cycles
    else:
        overhead = machine.launch_overhead_cycles
    run = native.replay(machine, traces, sram_mode=sram_mode, sram_cache_bytes=sram_cache_bytes) \
        if use_native else None
    if run is not None:
        overhead += placement_cycles(machine, run.cache)
        return TimingResult(machine=machine, kernel_cycles=run.makespan, launch_cycles=overhead,
                            commands=partial(records.command_records, run, traces),
                            programs=partial(records.program_records, run, traces),
                            counters=partial(records.counters, machine, run, overhead),
                            events_processed=run.events,
                            bandwidth_timeline=partial(records.timeline, run),
                            sram_cache=run.cache)
    replay = Replay(machine, traces, sram_mode=sram_mode, sram_cache_bytes=sram_cache_bytes)
    makespan = replay.run()
    stats = replay.cache.stats
    overhead += placement_cycles(machine, stats)
    counters = build_counters(machine, replay.commands, replay.programs, makespan, overhead, stats.to_dict())
    return TimingResult(machine=machine, kernel_cycles=makespan, launch_cycles=overhead,
                        commands=replay.commands, programs=replay.programs, counters=counters,
                        events_processed=replay.events, bandwidth_timeline=replay.timeline, sram_cache=stats)
