"""How a variable-input problem's fitness ranks kernels: fresh draws per evaluation vs a run's draws.

D49 (docs/DECISIONS.md): a search times every candidate and the seed on its run's draws (one secret
timing seed per run). Without it (`kegen eval` without --timing-seed) each evaluation times the
candidate on fresh draws and the seed on each of the same draws. This benchmark evaluates a few
recorded kernels of one problem, `--repeats` times in each mode, the kernels of one repeat sharing
one timing seed in "run" mode (as one search's candidates do), and prints each kernel's fitness
(speedup over the seed) per repeat, its spread, and how often a repeat ranked the kernels in the
order of their times on common draws.

    .venv/bin/python tools/bench_timing_draws.py --json runs/timing_draws.json
    .venv/bin/python tools/bench_timing_draws.py --problem jagged_softmax_fp32 --kernels \
        docs/results/production_mtia_2026-12-06_d49b_memory_kernels/jagged_softmax_fp32.py ...
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
from pathlib import Path
from typing import Any

from kegen.eval import EvalConfig, evaluate
from kegen.suites import find_suite

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
DEFAULT_KERNELS = [  # the fp16 sum bag's recorded bests, 80.8% to 85.7% of the roofline when recorded
    RESULTS / "production_mtia_2026-12-06_d44_kernels" / "embedding_bag_sum_fp16.py",
    RESULTS / "production_mtia_2026-12-06_bag_prefetch_kernels" / "embedding_bag_sum_fp16.py",
    RESULTS / "production_mtia_2026-12-06_d49b_memory_kernels" / "embedding_bag_sum_fp16.py",
]


def fitness(problem: Path, seed: Path, kernel: Path, timing_seed: int | None) -> dict[str, Any]:
    extra = {} if timing_seed is None else {"timing_seed": timing_seed}
    r = evaluate(problem, kernel.read_text(), baseline=seed,
                 config=EvalConfig(target="mtia", trials=3, timing_runs=3, extra=extra))
    if not r.ok:
        raise SystemExit(f"{kernel}: {r.status.value}: {r.message}")
    return {"fitness": r.fitness, "time_s": r.candidate_time_s, "seed_s": r.baseline_time_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default="embedding_bag_sum_fp16", help="a production suite problem")
    ap.add_argument("--kernels", nargs="+", type=Path, default=DEFAULT_KERNELS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args()
    p = find_suite("production").select([args.problem]).problems[0]
    names = [k.parent.name.removeprefix("production_mtia_").removesuffix("_kernels") for k in args.kernels]
    common = secrets.randbits(62)  # the kernels' true order: total time on one set of common draws
    truth = [fitness(p.problem_path, p.seed_path, k, common)["time_s"] for k in args.kernels]
    order = sorted(range(len(names)), key=lambda i: truth[i])
    out: dict[str, Any] = {"problem": args.problem, "kernels": names, "common_draw_time_s": truth}
    out["modes"] = {}
    for mode in ("fresh", "run"):
        rows = []
        for _ in range(args.repeats):
            seed = None if mode == "fresh" else secrets.randbits(62)
            rows.append([fitness(p.problem_path, p.seed_path, k, seed) for k in args.kernels])
        ranked = sum(sorted(range(len(names)), key=lambda i: -row[i]["fitness"]) == order for row in rows)
        out["modes"][mode] = {"repeats": rows, "ranked_as_common_draws": ranked}
    print(f"{args.problem}: {len(names)} kernels, {args.repeats} repeats per mode (simulated mtia-2i)")
    print("kernel".ljust(24) + "common-draw time  " + "  ".join(f"{m} fitness (min-max, spread)".ljust(34)
                                                            for m in out["modes"]))
    for i, name in enumerate(names):
        cells = []
        for m in out["modes"].values():
            f = [row[i]["fitness"] for row in m["repeats"]]
            spread = f"{min(f):.3f}-{max(f):.3f}, {max(f) / min(f) - 1:5.1%}"
            cells.append(f"{statistics.median(f):6.3f}x ({spread})".ljust(34))
        print(name.ljust(24) + f"{truth[i] * 1e6:9.2f} us      " + "  ".join(cells))
    for m, d in out["modes"].items():
        ranked = f"{d['ranked_as_common_draws']}/{args.repeats}"
        print(f"{m}: {ranked} repeats ranked the kernels as their common-draw times")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
