"""torch.compile's own code as a candidate on a GPU (issues 25, 26): per model, the GPU draft (Inductor's
kernels and autotuned configs, kegen.tune.gpu.draft) timed by the evaluator against its own
torch.compile and eager of the reference, then a short search seeded with the eager-like draft (one
kernel per op) in which the compile draft is a candidate (kegen.search.compile_candidate); the tuned
time is the fastest verified of draft / searched winner, and torch.compile's module where neither
beats it (kegen.tune.gpu.pick). Results go to <out>.json/.md after every step.

On the GPU machine, from the repository root:

    python3 tools/bench_tune_gpu.py kegen/models/dlrm.py kegen/models/encoder.py --budget 4 \
        --out $OUT/tune_nvidia_h200 --fixtures $OUT/fixtures --deadline 240
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _search(problem: Path, seed: Path, draft: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from kegen.search import SearchConfig, compile_candidate, run_search
    from kegen.search.config import (
        EvalSliceConfig,
        OperatorConfig,
        PolicyConfig,
        StoreConfig,
        TerminationConfig,
    )
    from kegen.search.store import GraphStore

    # the compile candidate is the draft measured above (drafting it again would compile it again)
    compile_candidate.gpu_drafter = lambda p, t: draft  # type: ignore[assignment]
    config = SearchConfig(
        problem=problem,
        seed=seed,
        out_dir=work / f"run-{problem.stem}",
        policy=PolicyConfig(name="greedy"),
        operator=OperatorConfig(name="offline"),
        termination=TerminationConfig(max_evaluations=args.budget, time_limit_s=args.search_time),
        eval=EvalSliceConfig(
            target=args.target, jobs=0, evaluator="tools.record_production_gpu:evaluate_without_ncu"
        ),
        store=StoreConfig(db=work / "search.db", warm_start=False),
        progress=False,
    )
    store = GraphStore(config.store.db)
    try:
        res = run_search(config, store)
        node = next((n for n in store.nodes(res.run_id) if n.operator == compile_candidate.OPERATOR), None)
        best = res.best
        return {
            "evaluations": res.evaluations,
            "stop_reason": res.stop_reason,
            "compile_candidate_present": node is not None,
            "compile_candidate_won": compile_candidate.compile_candidate_won(
                store, res.run_id, best.id if best else None
            ),
            "best_operator": best.operator if best else None,
            "best_description": best.description if best else None,
            "best_source": best.code if best else None,
        }
    finally:
        store.close()


def bench_model(path: Path, args: argparse.Namespace, rec: dict[str, Any], save: Any) -> None:
    """Fill `rec` step by step (each step saved): draft, measure, search, pick, verify."""
    from kegen.inductor.gpu_draft import capture_gpu, write_gpu_candidate
    from kegen.tune import gpu
    from kegen.tune.capture import load_model_file, write_variant_problems

    work = Path(args.work) / path.stem
    problem = write_variant_problems(load_model_file(path), work / "problems")[0]
    t0 = time.monotonic()
    gcap = capture_gpu(problem, args.target)
    draft, info = write_gpu_candidate(gcap, problem, args.target)
    rec["draft_capture_s"] = time.monotonic() - t0
    rec["kernels"] = info.kernels
    rec["extern"] = info.extern
    rec["configs"] = info.configs
    if args.fixtures:
        fx = Path(args.fixtures)
        fx.mkdir(parents=True, exist_ok=True)
        (fx / f"{path.stem}.output_code.txt").write_text(gcap.capture.code)
        (fx / f"{path.stem}.configs.json").write_text(json.dumps(gcap.configs, indent=1))
        (fx / f"{path.stem}_draft.py").write_text(draft)
    save()
    m = gpu.measure_vs_compile(problem, draft, args.target)
    rec.update(
        compile_s=m.compile_s, eager_s=m.eager_s, draft_s=m.draft_s, draft_ok=m.ok, draft_message=m.message
    )
    save()
    if args.budget <= 0 or time.monotonic() - args.started > args.deadline:
        rec["search"] = {"skipped": "budget 0 or past the deadline"}
    else:
        t0 = time.monotonic()
        unfused = gpu.draft(problem, args.target, fused=False)
        seed = work / "eager_draft.py"
        seed.write_text(unfused)
        rec["eager_draft_capture_s"] = time.monotonic() - t0
        rec["search"] = _search(problem, seed, draft, args, work)
        save()
    best = (rec.get("search") or {}).pop("best_source", None)
    tuned = gpu.measure_vs_compile(problem, best, args.target, seed=7) if best else None  # fresh inputs
    rec["tuned_s"] = tuned.draft_s if tuned and tuned.ok else None
    rec["tuned_verified"] = bool(tuned and tuned.ok)
    choice = gpu.pick({"compile": m.compile_s, "draft": m.draft_s if m.ok else None, "tuned": rec["tuned_s"]})
    rec["runs"] = choice
    model_s = {"compile": m.compile_s, "draft": m.draft_s, "tuned": rec["tuned_s"]}[choice]
    rec["model_s"] = model_s
    rec["speedup_vs_compile"] = m.compile_s / model_s if m.compile_s and model_s else None
    rec["draft_vs_compile"] = m.compile_s / m.draft_s if m.compile_s and m.draft_s else None
    rec["verified"] = choice == "compile" or (choice == "draft" and m.ok) or rec["tuned_verified"]
    save()


def markdown(data: dict[str, Any]) -> str:
    env = data["environment"]
    lines = [
        f"# kegen tune on {env.get('device')} (target {data['target']}): "
        "torch.compile's own code as the draft",
        "",
        f"torch {env.get('torch')}, Triton {env.get('triton')}, budget {data['budget']} per model; "
        "times are the evaluator's medians (CUDA events, L2 flushed, fresh inputs per call). "
        "`torch.compile` is the evaluator's own torch.compile of the reference (cuBLAS, flash attention); "
        "the draft is Inductor's code with GEMMs as Triton templates (a candidate may not call cuBLAS). "
        "`runs`: what the tuned model runs (never slower than torch.compile).",
        "",
        "| model | eager s | torch.compile s | draft s | draft / compile | tuned s | compile candidate "
        "won | runs | model speedup vs compile | verified |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def f(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else "-" if v is None else str(v)

    for name, r in data["models"].items():
        s = r.get("search") or {}
        lines.append(
            f"| {name} | {f(r.get('eager_s'))} | {f(r.get('compile_s'))} | {f(r.get('draft_s'))} | "
            f"{f(r.get('draft_vs_compile'))}x | {f(r.get('tuned_s'))} | "
            f"{f(s.get('compile_candidate_won'))} | "
            f"{f(r.get('runs'))} | {f(r.get('speedup_vs_compile'))}x | {f(r.get('verified'))} |"
        )
    for name, r in data["models"].items():
        if r.get("error") or r.get("draft_message"):
            lines.append(f"\n{name}: {r.get('error') or r.get('draft_message')}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--target", default="nvidia", choices=("nvidia", "amd"))
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--search-time", type=float, default=90.0)
    ap.add_argument("--deadline", type=float, default=240.0, help="start no search after this many s")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "tune_nvidia_h200"))
    ap.add_argument("--fixtures", default="", help="save each model's Inductor output code and configs here")
    ap.add_argument("--work", default="/tmp/kegen-tune-gpu")
    args = ap.parse_args(argv)
    args.started = time.monotonic()
    import torch
    import triton

    from tools.record_production_gpu import environment

    data: dict[str, Any] = {
        "target": args.target,
        "budget": args.budget,
        "environment": {**environment(), "triton": triton.__version__, "torch": torch.__version__},
        "models": {},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str))
        out.with_suffix(".md").write_text(markdown(data))

    for m in args.models:
        rec: dict[str, Any] = {}
        data["models"][Path(m).stem] = rec
        try:
            bench_model(Path(m), args, rec, save)
        except Exception as exc:  # recorded; the next model still runs
            rec["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        save()
        print(
            json.dumps({Path(m).stem: {k: v for k, v in rec.items() if k not in ("configs",)}}, default=str)[
                :3000
            ]
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
