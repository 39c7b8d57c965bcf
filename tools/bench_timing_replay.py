#!/usr/bin/env python3
"""Speed of the timing replay alone (mtia_sim.timing.simulate), in unit commands per host CPU second.

    .venv/bin/python tools/bench_timing_replay.py [--repeat 3] [--out docs/results/timing_replay]

Workloads: hand-built traces (a random mix, an all-PE DRAM stream, all-PE GEMM tiles) and the traces
of real Triton kernels lowered by kegen (a 1024^3 fp16 GEMM, a 48 MiB vector add), recorded once
through the functional simulator and then only replayed. Reports the median CPU time of `--repeat`
replays (CPU time is robust to a busy host), commands and timing events per CPU second, and the
ratio to the end-to-end target (200k commands per second, functional + timing).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from mtia_sim.events import CommandEvent, ProgramTrace
from mtia_sim.machine import load_machine
from mtia_sim.timing import simulate
from mtia_sim.timing.synthetic import dram_stream, gemm_tiles, random_traces

TARGET_END_TO_END = 200_000  # unit commands per host second, functional + timing (issue 13)
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


def _measure(name: str, traces: list[ProgramTrace], repeat: int) -> dict[str, Any]:
    m = load_machine("mtia-2i")
    commands = sum(1 for t in traces for e in t.events if isinstance(e, CommandEvent))
    cpu = []
    events = 0
    for _ in range(repeat):
        c0 = time.process_time()
        r = simulate(m, traces)
        cpu.append(time.process_time() - c0)
        events = r.events_processed
    med = statistics.median(cpu)
    return {"workload": name, "programs": len(traces), "commands": commands, "events": events,
            "cpu_s_median": round(med, 4), "commands_per_cpu_s": round(commands / med),
            "events_per_cpu_s": round(events / med),
            "ratio_to_end_to_end_target": round(commands / med / TARGET_END_TO_END, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="", help="write <out>.json (and print) when given")
    ap.add_argument("--no-real", action="store_true", help="hand-built traces only")
    args = ap.parse_args(argv)
    m = load_machine("mtia-2i")
    workloads: dict[str, list[ProgramTrace]] = {
        "random_mix_512_programs": random_traces(random.Random(0), m, programs=512, commands=100),
        "dram_stream_all_pes": dram_stream(m, 2048 * KB, chunk=16 * KB),
        "gemm_tiles_all_pes": gemm_tiles(m, tile=128, steps=200),
    }
    if not args.no_real:
        workloads.update(_real_traces())
    simulate(m, dram_stream(m, 64 * KB))  # warm up
    rows = [_measure(name, traces, args.repeat) for name, traces in workloads.items()]
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "repeat": args.repeat, "results": rows,
              "median_commands_per_cpu_s": round(statistics.median(r["commands_per_cpu_s"] for r in rows))}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
