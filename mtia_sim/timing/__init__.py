"""The timing model: replays the functional model's program traces on the modelled chip.

`simulate(machine, traces)` returns a `TimingResult` with the total cycles (launch overhead +
makespan), every command's schedule, and the counters. Functional results never depend on it: it
only reads `mtia_sim.events` records. The model, with every figure from the machine description:

- Cores: programs on one (PE, core) run back to back, `job_replacement_ns` apart; instructions
  cost `core_cpi` cycles each, a doorbell `command_issue_cycles`. A core stalls when the target
  unit already holds `command_queue_depth` waiting commands, at a fence until its earlier commands
  on the fenced units are done, and at the end until all its commands are done.
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
- Not modelled: local-store port contention between DMA and compute units, DRAM channel/bank
  effects, NoC link contention between transfers, cross-PE dependencies.
"""

from __future__ import annotations

from mtia_sim.counters import build_counters
from mtia_sim.events import ProgramTrace
from mtia_sim.machine import MachineDescription
from mtia_sim.timing.engine import Replay
from mtia_sim.timing.result import CommandRecord, ProgramRecord, TimingResult, as_timing_result

__all__ = ["CommandRecord", "ProgramRecord", "TimingResult", "as_timing_result", "simulate"]


def simulate(machine: MachineDescription, traces: list[ProgramTrace], *,
             launch_overhead: bool = True) -> TimingResult:
    """Replay all programs of one launch concurrently; cycles, schedule and counters.

    Programs on the same (PE, core) run back to back in list order, paying the job replacement
    cost between them; different cores and PEs run concurrently. With `launch_overhead`, the
    description's launch overhead is added to the makespan.
    """
    replay = Replay(machine, traces)
    makespan = replay.run()
    launch = machine.launch_overhead_cycles if launch_overhead and traces else 0.0
    counters = build_counters(machine, replay.commands, replay.programs, makespan, launch)
    return TimingResult(machine=machine, kernel_cycles=makespan, launch_cycles=launch,
                        commands=replay.commands, programs=replay.programs, counters=counters,
                        events_processed=replay.events, bandwidth_timeline=replay.timeline)
