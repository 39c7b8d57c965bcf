"""Benchmark: the mtia local-store plans (docs/DECISIONS.md D38) on the production suite's kernels.

Each kernel is evaluated twice on the simulated chip with the same inputs: as it is (the default
"spread" plan: next-fit placement, rotating slots for carried tiles computed ahead, "packed" then
"compact" when that does not fit, D87) and with `local_store_plan="compact"` on every launch
(first-fit placement, one slot per carried tensor: the plan before D38). Prints a table and, with
--json, the rows.

    python tools/bench_alloc_policy.py                      # the suite's seeds
    python tools/bench_alloc_policy.py --work runs/X/work   # the best kernels of a production record
    python tools/bench_alloc_policy.py --only attention_fwd_fp16 --kernel my_attention.py

Simulated times do not depend on the host; a run of the whole suite takes ~15 min on 2 cores.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def with_plan(source: str, plan: str) -> str:
    """`source` with `local_store_plan=plan` on every kernel launch."""
    from kegen.search.operators.mutations.launches import launches

    tree = ast.parse(source)
    for _, _, call in launches(tree):
        call.keywords = [k for k in call.keywords if k.arg != "local_store_plan"]
        call.keywords.append(ast.keyword(arg="local_store_plan", value=ast.Constant(plan)))
    return ast.unparse(tree) + "\n"


def kernels(work: Path | None, only: list[str], kernel: Path | None) -> list[tuple[str, Path, str]]:
    """(problem name, problem file, candidate source) for each problem asked for."""
    from kegen.suites import find_suite

    suite = find_suite("production")
    problems = suite.select(only).problems if only else suite.problems
    out = []
    for p in problems:
        if kernel is not None:
            source = kernel.read_text()
        elif work is not None:
            found = sorted((work / p.name).glob("search/*/best.py"))
            if not found:
                print(f"{p.name}: no best.py under {work / p.name}; skipped", file=sys.stderr)
                continue
            source = found[0].read_text()
        else:
            source = p.seed_path.read_text()
        out.append((p.name, p.problem_path, source))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="a production record's work folder (best kernels)")
    ap.add_argument("--only", default="", help="problems, comma-separated")
    ap.add_argument("--kernel", type=Path, help="one candidate file (with --only NAME)")
    ap.add_argument("--seed", type=int, default=1, help="input seed (the same for both plans)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    from kegen.eval import EvalConfig, evaluate

    only = [s for s in args.only.split(",") if s]
    config = EvalConfig(target="mtia", trials=1, profile=False, seed=args.seed, fresh_process=True,
                        extra={"reproducible": True})  # the same inputs for both plans
    rows = []
    print(f"{'problem':<26} {'spread':>10} {'compact':>10} {'compact/spread':>15}")
    for name, problem, source in kernels(args.work, only, args.kernel):
        times = {}
        for plan in ("spread", "compact"):
            r = evaluate(problem, with_plan(source, plan), config=config)
            times[plan] = r.candidate_time_s if r.status.value == "ok" else None
            if times[plan] is None:
                print(f"{name}: {plan}: {r.status.value} {r.message[:200]}", file=sys.stderr)
        ratio = times["compact"] / times["spread"] if times["spread"] and times["compact"] else None
        rows.append({"problem": name, "spread_s": times["spread"], "compact_s": times["compact"],
                     "ratio": ratio})
        fmt = lambda t: f"{t * 1e6:8.2f}us" if t else "     -    "  # noqa: E731
        print(f"{name:<26} {fmt(times['spread']):>10} {fmt(times['compact']):>10} "
              f"{(f'{ratio:.3f}x' if ratio else '-'):>15}", flush=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        geo = math.exp(statistics.fmean(math.log(x) for x in ratios))
        print(f"geomean compact/spread {geo:.3f}x over {len(ratios)} kernels; "
              f"median {statistics.median(ratios):.3f}x; min {min(ratios):.3f}x; max {max(ratios):.3f}x")
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
