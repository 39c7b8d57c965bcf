#!/usr/bin/env python3
"""Speed of the timing replay alone (mtia_sim.timing.simulate), native vs Python, in unit commands
per host CPU second.

    .venv/bin/python tools/bench_timing_replay.py [--repeat 3] [--out docs/results/timing_replay]
        [--no-real] [--no-python]

Workloads: hand-built traces (a random mix, an all-PE DRAM stream, all-PE GEMM tiles) and the traces
of real Triton kernels lowered by kegen (a 1024^3 fp16 GEMM, a 48 MiB vector add), recorded once
through the functional simulator and then only replayed. For each, the median CPU time of `--repeat`
replays (CPU time is robust to a busy host) of `simulate()` with the native replay (counters
included; and "cycles only", what timing a call needs: the counters are built on first access) and
with the Python one, the native run split into its parts (trace conversion + replay in C; counters;
building every CommandRecord/ProgramRecord, which only happens when someone reads them), commands
per CPU second and the ratios. It checks that both replays give
the same cycles. The machine load (`os.getloadavg`) is recorded next to the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtia_sim.events import CommandEvent, ProgramTrace
from mtia_sim.machine import MachineDescription, load_machine
from mtia_sim.timing import native, simulate
from mtia_sim.timing.native import records
from mtia_sim.timing.synthetic import dram_stream, gemm_tiles, random_traces

TARGET_END_TO_END = 200_000  # unit commands per host second, functional + timing (issue 13)
TARGET_REPLAY = 400_000  # what the replay alone needs for that (issue 13, with the functional side)
KB = 1024


def _real_traces() -> dict[str, list[ProgramTrace]]:
    """Traces of real kernels (needs triton and the mtia backend; skipped without them)."""
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import fidelity_kernels as fk
    except ImportError as exc:
        print(f"real kernels skipped: {exc}", file=sys.stderr)
        return {}
    return {
        "real_gemm_1024_fp16": fk.run_gemm("mtia-2i", 1024, bm=128, bk=64, stages=2, modes=()).result.traces,
        "real_vector_add_48MiB": fk.run_vector_add("mtia-2i", 48 << 20, modes=()).result.traces,
    }


def _cpu(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        c0 = time.process_time()
        fn()
        times.append(time.process_time() - c0)
    return statistics.median(times)


def _measure(m: MachineDescription, name: str, traces: list[ProgramTrace], repeat: int,
             python: bool) -> dict[str, Any]:
    commands = sum(1 for t in traces for e in t.events if isinstance(e, CommandEvent))
    nat = simulate(m, traces)
    run = native.replay(m, traces)
    if run is None:
        raise RuntimeError(f"{name}: the native replay refused the workload (or is unavailable)")
    row: dict[str, Any] = {"workload": name, "programs": len(traces), "commands": commands,
                           "events": nat.events_processed}
    t_native = _cpu(lambda: simulate(m, traces).counters, repeat)
    t_cycles = _cpu(lambda: simulate(m, traces).cycles, repeat)
    row["native"] = {
        "cpu_s": round(t_native, 4), "commands_per_cpu_s": round(commands / t_native),
        "cycles_only_cpu_s": round(t_cycles, 4), "cycles_only_commands_per_cpu_s": round(commands / t_cycles),
        "replay_cpu_s": round(_cpu(lambda: native.replay(m, traces), repeat), 4),
        "counters_cpu_s": round(_cpu(lambda: records.counters(m, run, 0.0), repeat), 4),
        "records_cpu_s": round(_cpu(lambda: (records.command_records(run, traces),
                                             records.program_records(run, traces)), repeat), 4),
        "ratio_to_replay_target": round(commands / t_native / TARGET_REPLAY, 2),
    }
    if python:
        py = simulate(m, traces, use_native=False)
        if abs(py.cycles - nat.cycles) > 1e-9 * max(1.0, py.cycles):
            raise RuntimeError(f"{name}: native {nat.cycles} != Python {py.cycles} cycles")
        t_py = _cpu(lambda: simulate(m, traces, use_native=False), repeat)
        row["python"] = {"cpu_s": round(t_py, 4), "commands_per_cpu_s": round(commands / t_py)}
        row["speedup"] = round(t_py / t_native, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="", help="write <out>.json (and print) when given")
    ap.add_argument("--no-real", action="store_true", help="hand-built traces only")
    ap.add_argument("--no-python", action="store_true", help="native replay only")
    args = ap.parse_args(argv)
    m = load_machine("mtia-2i")
    workloads: dict[str, list[ProgramTrace]] = {
        "random_mix_512_programs": random_traces(random.Random(0), m, programs=512, commands=100),
        "dram_stream_all_pes": dram_stream(m, 2048 * KB, chunk=16 * KB),
        "gemm_tiles_all_pes": gemm_tiles(m, tile=128, steps=200),
    }
    if not args.no_real:
        workloads.update(_real_traces())
    simulate(m, dram_stream(m, 64 * KB))  # warm up (and build the native library)
    load = os.getloadavg()
    rows = [_measure(m, name, traces, args.repeat, not args.no_python) for name, traces in workloads.items()]
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "repeat": args.repeat, "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load],
        "load_average_after": [round(x, 2) for x in os.getloadavg()], "results": rows,
        "median_native_commands_per_cpu_s": round(statistics.median(
            r["native"]["commands_per_cpu_s"] for r in rows)),
    }
    if not args.no_python:
        report["median_python_commands_per_cpu_s"] = round(statistics.median(
            r["python"]["commands_per_cpu_s"] for r in rows))
        report["median_speedup"] = round(statistics.median(r["speedup"] for r in rows), 1)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
