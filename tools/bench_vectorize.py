"""Seed vs loop-vectorized seed (`kegen.search.operators.mutations.vectorize`) on the simulated MTIA.

For each problem: the seed and its rewrites with R rows per step are evaluated (correctness
against PyTorch, simulated time, roofline fraction = roofline time / candidate time) and the top
stalls of its diagnosis are listed (`kegen.profiling.diagnose`: UNIT:reason, share of the stalls).
Prints a table and one JSON object (`--out` writes it to a file too).

    .venv/bin/python tools/bench_vectorize.py                       # full size, mtia-2i
    KEGEN_SUITE_SCALE=0.02 .venv/bin/python tools/bench_vectorize.py --rows 8
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

from kegen.eval import EvalConfig, evaluate
from kegen.profiling import diagnose
from kegen.profiling.render import diagnosis_line
from kegen.search.operators.mutations.knobs import apply_launch_options
from kegen.search.operators.mutations.vectorize import vectorize
from kegen.suites import find_suite

PROBLEMS = ("embedding_bag_mean_fp32", "embedding_bag_sum_fp16", "jagged_sum_fp32", "jagged_softmax_fp32")


def measure(problem: Path, source: str, config: EvalConfig) -> dict[str, Any]:
    r = evaluate(problem, source, config=config)
    out: dict[str, Any] = {"status": r.status.value, "message": r.message[:300]}
    if r.status.value == "ok":
        t, roof = r.candidate_time_s, r.roofline_time_s
        out |= {"time_s": t, "roofline_time_s": roof, "roofline_fraction": roof / t if t and roof else None}
        diag = diagnose(r.profile)
        out["stalls"] = [(reason, round(share, 3)) for reason, share in diag.stalls]
        out["diagnosis"] = diagnosis_line(diag)
    return out


def _with_options(source: str, options: dict[str, str]) -> str:
    """`source` with launch options (`num_stages=2`) set on every launch of its kernels."""
    if not options:
        return source
    values = {k: int(v) if v.isdigit() else v for k, v in options.items()}
    return apply_launch_options(source, {kernel: values for kernel in _kernels(source)})


def _kernels(source: str) -> list[str]:
    return [
        n.name
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    ap.add_argument("--rows", nargs="*", type=int, default=[8, 32])
    ap.add_argument("--machine", default="mtia-2i")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per evaluation")
    ap.add_argument("--options", default="", help="launch options for the rewrites, e.g. num_stages=2")
    ap.add_argument("--no-seed", action="store_true", help="evaluate the rewrites only")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    config = EvalConfig(target="mtia", machine=args.machine, trials=1, timeout_s=args.timeout)
    options = dict(kv.split("=", 1) for kv in args.options.split(",") if kv)
    suite = find_suite("production")
    results: dict[str, Any] = {"machine": args.machine, "scale": os.environ.get("KEGEN_SUITE_SCALE", "1")}
    for p in suite.select(args.problems).problems:
        seed = p.seed_path.read_text()
        variants = ({} if args.no_seed else {"seed": seed}) | {
            f"R={r}": _with_options(vectorize(seed, r), options) for r in args.rows
        }
        row: dict[str, Any] = {}
        for name, src in variants.items():
            row[name] = measure(p.problem_path, src, config)
            m = row[name]
            frac = m.get("roofline_fraction")
            print(
                f"{p.name:28s} {name:6s} {m['status']:8s} time {m.get('time_s', 0) * 1e6:9.1f} us  "
                f"roofline {frac if frac is None else f'{frac:.1%}'}  stalls {m.get('stalls')}",
                flush=True,
            )
        base = row.get("seed", {}).get("time_s")
        for m in row.values():
            if base and m.get("time_s"):
                m["speedup_vs_seed"] = base / m["time_s"]
        results[p.name] = row
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
