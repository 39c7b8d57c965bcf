"""Search efficiency on production-size problems: roofline fraction reached, evaluations to 90% of
the final best, and what screening skipped (duplicates, compile rejections, hopeless plans).

    .venv/bin/python tools/bench_search_efficiency.py kegen/suites/production/gemm_bf16_1024 \
        --budget 50 --json docs/results/search_efficiency.json [--no-screening] [--append]

Each argument is a suite problem folder (problem.py + seed.py) or a problem file (the search then
drafts its seed). Prints one line per problem and writes the JSON records (one per problem).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def run_one(path: Path, budget: int, screening: bool, jobs: int, db: Path, rng_seed: int) -> dict[str, Any]:
    from kegen.search.config import EvalSliceConfig, SearchConfig, StoreConfig, TerminationConfig
    from kegen.search.loop import SearchDriver

    problem = path / "problem.py" if path.is_dir() else path
    seed = path / "seed.py" if path.is_dir() and (path / "seed.py").is_file() else None
    config = SearchConfig(
        problem=problem,
        seed=seed,
        rng_seed=rng_seed,
        termination=TerminationConfig(max_evaluations=budget),
        eval=EvalSliceConfig(jobs=jobs),
        store=StoreConfig(db=db, warm_start=False),
        progress=False,
    )
    driver = SearchDriver(config)
    driver.screening.config = replace(driver.screening.config, enabled=screening)
    driver.screening.active = driver.screening.active and screening
    t0 = time.perf_counter()
    result = driver.run()
    wall = time.perf_counter() - t0
    root_ev = driver.store.evaluation(result.root.id)
    best_ev = driver.store.evaluation(result.best.id) if result.best else None
    trace = []
    for n in driver.store.nodes(result.run_id):
        ev = driver.store.evaluation(n.id) if n.evaluated else None
        trace.append(
            {
                "node": n.id,
                "parent": n.parent_id,
                "verdict": n.verdict,
                "fitness": round(n.fitness, 4),
                "roofline": ev.roofline_fraction if ev else None,
                "screen": (ev.metrics or {}).get("screen") if ev else None,
                "description": (n.description or "")[:120],
                "message": (ev.message or "")[:200] if ev else "",
            }
        )
    return {
        "problem": str(path),
        "budget": budget,
        "screening": screening,
        "jobs": jobs,
        "stop_reason": result.stop_reason,
        "evaluations": result.evaluations,
        "best_speedup": round(result.best_speedup, 4),
        "seed_roofline_fraction": root_ev.roofline_fraction if root_ev else None,
        "best_roofline_fraction": best_ev.roofline_fraction if best_ev else None,
        "best_time_s": best_ev.candidate_time_s if best_ev else None,
        "best_description": result.best.description if result.best else None,
        "wall_s": round(wall, 1),
        **result.screening,
        "trace": trace,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--no-screening", action="store_true")
    ap.add_argument("--json", type=Path, help="write (or with --append, extend) the records here")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--db", type=Path, help="graph store (default: a fresh one in a temporary directory)")
    args = ap.parse_args(argv)
    records: list[dict[str, Any]] = []
    if args.append and args.json and args.json.is_file():
        records = json.loads(args.json.read_text())
    with tempfile.TemporaryDirectory(prefix="kegen-effbench-") as tmp:
        db = args.db or Path(tmp) / "search.db"
        for p in args.problems:
            rec = run_one(p, args.budget, not args.no_screening, args.jobs, db, args.rng_seed)
            records.append(rec)
            print(
                f"{p}: best {rec['best_speedup']:.3f}x, roofline {rec['seed_roofline_fraction']} -> "
                f"{rec['best_roofline_fraction']}, evals {rec['evaluations']}, evals_to_90 "
                f"{rec['evals_to_90']}, screening {rec['screening']}, {rec['wall_s']} s",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
