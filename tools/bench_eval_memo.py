"""Wall time of one evaluation as a search sees it: cold, warm without the evaluator's memo, warm
with it (baselines, seed, roofline reused), each with its phase timeline. Any target.

    .venv/bin/python tools/bench_eval_memo.py --target mtia --problem softmax_fp32 --repeat 3
    python3 tools/bench_eval_memo.py --target nvidia --problem layer_norm_bf16 --json out.json   # H200

The problem is a suite problem (`--suite`, default production; KEGEN_SUITE_SCALE shrinks it)
evaluated with its seed as the candidate and as the baseline (what a search's evaluations do).
`gpu_profile` is the search's ("auto"): ncu runs on the first evaluation only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def one(problem: Any, target: str, machine: str) -> dict[str, Any]:
    from kegen.eval import EvalConfig, evaluate

    t0 = time.monotonic()
    r = evaluate(
        problem.problem_path,
        problem.seed_path,
        baseline=problem.seed_path,
        config=EvalConfig(target=target, machine=machine),
    )
    return {
        "status": r.status.value,
        "wall_s": time.monotonic() - t0,
        "memo": r.details.get("memo") or [],
        "ncu": r.details.get("ncu"),
        "phases_s": r.details.get("phases_s"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="production")
    ap.add_argument("--problem", default="softmax_fp32")
    ap.add_argument("--target", default="mtia", choices=("mtia", "nvidia", "amd", "cpu"))
    ap.add_argument("--machine", default="mtia-2i")
    ap.add_argument("--repeat", type=int, default=3, help="warm evaluations of each kind")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    from kegen.eval.trusted import memo
    from kegen.suites import find_suite

    (problem,) = find_suite(args.suite).select([args.problem]).problems
    cold = one(problem, args.target, args.machine)
    with_memo = [one(problem, args.target, args.machine) for _ in range(args.repeat)]
    without = []
    for _ in range(args.repeat):
        memo.clear()
        without.append(one(problem, args.target, args.machine))
    result = {
        "problem": args.problem,
        "target": args.target,
        "suite_scale": os.environ.get("KEGEN_SUITE_SCALE", "1"),
        "cold": cold,
        "warm_with_memo": with_memo,
        "warm_without_memo": without,
        "median_warm_with_memo_s": statistics.median(r["wall_s"] for r in with_memo),
        "median_warm_without_memo_s": statistics.median(r["wall_s"] for r in without),
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "load": os.getloadavg(),
    }
    result["memo_saving"] = result["median_warm_without_memo_s"] / max(
        result["median_warm_with_memo_s"], 1e-9
    )
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if cold["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
