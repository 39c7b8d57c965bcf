#!/usr/bin/env python
"""Evaluations per minute with 1, 2, 4, ... workers through `kegen.executor` (simulator evaluations).

Each point starts a fresh executor with W workers, runs W untimed warm-up evaluations (interpreter
start, imports, zygotes), then times PER_WORKER x W evaluations of the same candidate submitted at
once. Efficiency = rate(W) / (W x rate(1)); 1.0 is linear. Prints a table and writes JSON.

    .venv/bin/python tools/bench_executor_scaling.py --workers 1,2,4,8,16 --per-worker 3 \
        --json docs/results/executor_scaling.json
    ... --executor ray --ray-address 127.0.0.1:6379   # the same over a Ray cluster
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kegen.eval.request import EvalRequest  # noqa: E402
from kegen.executor import ExecutorSpec, FileRef, make_executor  # noqa: E402
from kegen.search.fitness import evaluate_task, load_evaluator  # noqa: E402

EVALUATOR = "kegen.search.fitness:evaluate_candidate"


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "triton", "ray"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # not installed
            pass
    return out


def _rel(p: Path) -> str:
    p = p.resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def run_point(spec: ExecutorSpec, problem: FileRef, code: str, machine: str, per_worker: int,
              timeout_s: float | None) -> dict[str, Any]:
    """Warm up, then time `per_worker * slots` evaluations; the point's numbers."""
    args = (load_evaluator(EVALUATOR), EvalRequest(problem, code, None, target="mtia", machine=machine,
                                                    timeout_s=timeout_s))
    with make_executor(spec) as ex:
        w = ex.slots
        t0 = time.perf_counter()
        warm = [ex.submit(evaluate_task, *args) for _ in range(w)]
        warm_results = [f.result() for f in warm]
        warm_status = [r["status"] for r in warm_results]
        warm_messages = [r["message"] for r in warm_results if r["status"] != "ok"]
        warm_s = time.perf_counter() - t0
        n = per_worker * w
        t0 = time.perf_counter()
        futs = [ex.submit(evaluate_task, *args) for _ in range(n)]
        results = [f.result() for f in futs]
        wall = time.perf_counter() - t0
    statuses = [r["status"] for r in results]
    durations = [r["duration_s"] for r in results if r.get("duration_s")]
    return {
        "workers": w,
        "evaluations": n,
        "wall_s": round(wall, 3),
        "evals_per_min": round(n / wall * 60, 2),
        "median_eval_s": round(statistics.median(durations), 3) if durations else None,
        "warmup_s": round(warm_s, 3),
        "ok": statuses.count("ok"),
        "statuses": sorted(set(statuses + warm_status)),
        "first_failure": next((r["message"][:500] for r in results if r["status"] != "ok"), None),
        "warmup_failures": [m[:300] for m in warm_messages if m],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cpus = os.cpu_count() or 1
    default_workers = ",".join(str(1 << i) for i in range(cpus.bit_length()) if (1 << i) <= cpus)
    ap.add_argument("--workers", default=default_workers, help=f"comma-separated (default {default_workers})")
    ap.add_argument("--per-worker", type=int, default=3, help="timed evaluations per worker")
    ap.add_argument("--problem", type=Path, default=ROOT / "kegen/examples/softmax/problem.py")
    ap.add_argument("--candidate", type=Path, default=ROOT / "kegen/examples/softmax/seed.py")
    ap.add_argument("--machine", default="mtia-2i")
    ap.add_argument("--executor", default="local", choices=("local", "ray"))
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--timeout", type=float, default=None, help="per-evaluation time limit (s)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    a = ap.parse_args(argv)
    problem, code = FileRef.of(a.problem), a.candidate.read_text()
    points: list[dict[str, Any]] = []
    print(f"{'workers':>7} {'evals':>5} {'wall s':>8} {'evals/min':>9} {'eff.':>5} {'eval s':>7}  statuses",
          flush=True)
    for w in (int(x) for x in a.workers.split(",")):
        spec = ExecutorSpec(a.executor, w, a.ray_address, "mtia")
        p = run_point(spec, problem, code, a.machine, a.per_worker, a.timeout)
        base = points[0] if points else p
        linear = p["workers"] / base["workers"] * base["evals_per_min"]
        p["efficiency"] = round(p["evals_per_min"] / linear, 3)
        points.append(p)
        if p["ok"] == 0:
            print(f"no evaluation succeeded: {p['first_failure']}", flush=True)
            break
        print(f"{p['workers']:>7} {p['evaluations']:>5} {p['wall_s']:>8.1f} {p['evals_per_min']:>9.1f} "
              f"{p['efficiency']:>5.2f} {p['median_eval_s'] or 0:>7.2f}  {','.join(p['statuses'])}",
              flush=True)
    report = {
        "what": "simulator evaluations per minute vs. workers (kegen.executor)",
        "executor": a.executor,
        "problem": _rel(a.problem),
        "candidate": _rel(a.candidate),
        "machine": a.machine,
        "per_worker": a.per_worker,
        "host": {"cpus": cpus, "platform": platform.platform(), **_versions()},
        "points": points,
    }
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(p["ok"] == p["evaluations"] for p in points) else 1


if __name__ == "__main__":
    raise SystemExit(main())
