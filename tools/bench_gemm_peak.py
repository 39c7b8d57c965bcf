"""GEMM-class searches on mtia-2i: how close the offline operator gets to the fp16 peak and the roofline.

Tasks (run one search each, offline operator, from the given seed):

- `peak_2048`: a plain masked fp16 GEMM at 2048^3 with 128x128 tiles (BLOCK_K 32, one stage: the
  production gemm_fp16_2048 seed with its tile set to 128x128). Target: >= 75% of the chip's fp16
  peak within 30 evaluations (issue 26).
- the GEMM-class production problems (`kegen/suites/production/<name>`, their own seeds):
  gemm_bf16_4096, linear_bias_gelu_bf16, conv1d_fp16, conv2d_fp16 (and any other given by name).
  Target: >= 80% of the roofline.

    .venv/bin/python tools/bench_gemm_peak.py --work-dir runs/gemm-peak --budget 30 --jobs 4 \
        --json docs/results/gemm_peak_mtia.json [--tasks peak_2048,conv2d_fp16] [--inner-jobs 2]

`--jobs N` runs N searches side by side (each in its own process, `--inner-jobs` evaluation workers
each). Resumable: each finished task leaves `<work-dir>/<task>.json` and a rerun skips it; the JSON
(and the printed table) gathers every finished task. Set KEGEN_SUITE_SCALE for reduced shapes (not
production results; the scale is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "kegen" / "suites" / "production"
DEFAULT_TASKS = ("peak_2048", "gemm_bf16_4096", "linear_bias_gelu_bf16", "conv1d_fp16", "conv2d_fp16")
PEAK_TARGET, ROOFLINE_TARGET = 0.75, 0.80


def peak_seed() -> str:
    """The plain 128x128-tile masked fp16 GEMM: gemm_fp16_2048's seed with its tile set to 128x128."""
    src = (SUITE / "gemm_fp16_2048" / "seed.py").read_text()
    out = src.replace("BM, BN, BK = 64, 64, 32", "BM, BN, BK = 128, 128, 32")
    if out == src:
        raise SystemExit("gemm_fp16_2048/seed.py no longer sets `BM, BN, BK = 64, 64, 32`")
    return out


def _task_dir(task: str, work: Path) -> Path:
    """A folder holding the task's problem.py and seed.py."""
    if task == "peak_2048":
        folder = work / "peak_2048"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "problem.py").write_text((SUITE / "gemm_fp16_2048" / "problem.py").read_text())
        (folder / "seed.py").write_text(peak_seed())
        return folder
    folder = SUITE / task
    if not (folder / "problem.py").is_file() or not (folder / "seed.py").is_file():
        raise SystemExit(f"no production problem {task} (kegen/suites/production/{task})")
    return folder


def _flops(record: dict[str, Any]) -> float | None:
    """2*M*N*K of the 2048^3 task at the current scale (read from its problem module)."""
    import importlib.util

    path = Path(record["problem"]) / "problem.py"
    spec = importlib.util.spec_from_file_location("peak_problem", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return 2.0 * mod.M * mod.N * mod.K


def run_task(task: str, work: Path, budget: int, inner_jobs: int, rng_seed: int) -> dict[str, Any]:
    """One search in this process (the child side of `--jobs`)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    from bench_search_efficiency import run_one  # type: ignore[import-not-found]

    folder = _task_dir(task, work)
    rec = run_one(folder, budget, True, inner_jobs, work / f"{task}.db", rng_seed)
    rec["task"] = task
    rec["scale"] = os.environ.get("KEGEN_SUITE_SCALE", "1")
    if task == "peak_2048":
        from mtia_sim.machine import load_machine

        peak = load_machine("mtia-2i").peak_flops("fp16")
        flops = _flops(rec)
        rec["peak_flops"] = peak
        best = rec.get("best_time_s")
        rec["best_peak_fraction"] = round(flops / best / peak, 4) if best and flops else None
        rec["target"] = f">= {PEAK_TARGET:.0%} of the fp16 peak"
        rec["met"] = bool(rec["best_peak_fraction"] and rec["best_peak_fraction"] >= PEAK_TARGET)
    else:
        frac = rec.get("best_roofline_fraction")
        rec["target"] = f">= {ROOFLINE_TARGET:.0%} of the roofline"
        rec["met"] = bool(frac and frac >= ROOFLINE_TARGET)
    return rec


def _child(task: str, args: argparse.Namespace) -> dict[str, Any]:
    out = args.work_dir / f"{task}.json"
    if out.is_file():
        return dict(json.loads(out.read_text()))
    cmd = [
        sys.executable,
        __file__,
        "--child",
        task,
        "--work-dir",
        str(args.work_dir),
        "--budget",
        str(args.budget),
        "--inner-jobs",
        str(args.inner_jobs),
        "--rng-seed",
        str(args.rng_seed),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0 or not out.is_file():
        return {
            "task": task,
            "error": f"exit {proc.returncode}",
            "stderr_tail": proc.stderr[-1500:],
            "wall_s": round(time.perf_counter() - t0, 1),
        }
    return dict(json.loads(out.read_text()))


def _line(rec: dict[str, Any]) -> str:
    if "error" in rec:
        return f"{rec['task']:24} failed: {rec['error']} {rec.get('stderr_tail', '')[-300:]}"
    peak = rec.get("best_peak_fraction")
    return (
        f"{rec['task']:24} roofline {rec.get('seed_roofline_fraction')} -> "
        f"{rec.get('best_roofline_fraction')}"
        + (f", fp16 peak {peak:.1%}" if peak else "")
        + f", {rec['evaluations']} evals (to 90%: {rec.get('evals_to_90')}), target {rec['target']}: "
        + ("met" if rec["met"] else "MISSED")
        + f", {rec['wall_s']} s; best: {(rec.get('best_description') or '')[:90]}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated task names")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "gemm-peak")
    ap.add_argument("--budget", type=int, default=30, help="search evaluations per task")
    ap.add_argument("--jobs", type=int, default=1, help="searches side by side")
    ap.add_argument("--inner-jobs", type=int, default=1, help="evaluation workers per search")
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write every finished task's record here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.work_dir = args.work_dir.resolve()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.child:
        rec = run_task(args.child, args.work_dir, args.budget, args.inner_jobs, args.rng_seed)
        (args.work_dir / f"{args.child}.json").write_text(json.dumps(rec, indent=1) + "\n")
        return 0
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for t in tasks:
        _task_dir(t, args.work_dir)  # unknown names fail before any search starts
    records: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for rec in pool.map(lambda t: _child(t, args), tasks):
            records.append(rec)
            print(_line(rec), flush=True)
            if args.json:
                args.json.write_text(json.dumps(records, indent=1) + "\n")
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
