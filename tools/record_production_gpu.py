"""Record the `production` suite on an NVIDIA GPU: the seed against torch eager and torch.compile,
then a short offline search per problem, with the wall time of every evaluation.

On the GPU machine (Python 3.12, torch, Triton, ncu; no bwrap: evaluations run unsandboxed, with
`details.sandbox_warning`; no internet; 10 minutes a command), from the repository root:

    pip install -q --no-deps --no-build-isolation -e . ; export PYTHONPATH=$PWD
    timeout 570 python3 tools/record_production_gpu.py --budget 6 --search-time 60 --deadline 420 \
        --skip-done --work /tmp/kpg 2>&1 | tee $OUT/record.log | tail -40
    tar czf $OUT/production_nvidia.tgz docs/results/production_nvidia*

then unpack the archive into the checkout (`tar xzf production_nvidia.tgz`) so that the next
command, with the same arguments, carries the records and continues where this one stopped.

Per problem it (1) evaluates the seed (kernel table; ncu when no search follows, else the
search's root evaluation runs it) and times eager and torch.compile of the reference; (2)
re-evaluates the seed `--warm-evals` times the way a search does (`gpu_profile="auto"`, baselines
from the evaluator's memo): the wall time of an evaluation after the first; (3) where the
reference calls `.float()` (production references upcast fp16/bf16 operands for an exact CPU
reference), times eager and torch.compile with the operands kept in their native dtype
(`kegen.bench.native_dtype`): the table's eager/compile are the faster of the two, so speedups are
never measured against an fp32 computation a production model would not run; (4) runs `--budget`
evaluations of an offline search (`--jobs 0`: in this process, so the evaluator's memo and warm
worker serve every candidate), no longer than `--search-time` seconds.

Results go to `<out>/production_nvidia/<problem>.json` as each phase ends; the summary
(`<out>/production_nvidia.json` and `.md`) is rebuilt from those files at the end, so the tool is
resumable: `--skip-done` skips phases already recorded (with at least this budget), `--only a,b`
runs some problems, and `--deadline` (seconds) starts no new phase after that much time (the first
one always runs), so one command fits a 10-minute limit. `--target cpu|mtia` runs the same logic
elsewhere (tests; KEGEN_SUITE_SCALE shrinks the problems); results then go to
production_<target>_logic.* unless `--name` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# the summary (also read by tests through this module: geomean, markdown, summarize)
from tools.production_summary import PROFILE_METRICS, write_summary  # noqa: E402 - needs ROOT on sys.path
from tools.production_summary import geomean as geomean  # noqa: E402
from tools.production_summary import markdown as markdown  # noqa: E402
from tools.production_summary import summarize as summarize  # noqa: E402

MODULE = "record_production_gpu"  # the search's in-process evaluator is looked up by this name
DEFAULT_EVALUATOR = "kegen.search.fitness:evaluate_candidate"


def environment() -> dict[str, Any]:
    """The software and device of the recording."""
    import os

    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "cuda": str(torch.version.cuda),
        "suite_scale": os.environ.get("KEGEN_SUITE_SCALE", "1"),
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = "none"
    return env


def seed_phase(problem: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The seed (kernel table; ncu here only when no search follows: the search's root evaluation
    profiles the seed), eager and torch.compile; then warm re-evaluations in search mode."""
    from kegen.eval import EvalConfig, evaluate

    ncu_here = args.ncu == "auto" and args.budget <= 0
    cfg = EvalConfig(
        target=args.target,
        machine=args.machine,
        timeout_s=args.timeout,
        gpu_profile="full" if ncu_here else "auto",
        extra={} if ncu_here else {"ncu_if_faster_than": 0.0},
    )
    t0 = time.monotonic()
    r = evaluate(problem.problem_path, problem.seed_path, config=cfg)
    rec: dict[str, Any] = {
        "status": r.status.value,
        "message": r.message[:500],
        "seed_s": r.candidate_time_s,
        "eager_s": r.times.get("eager"),
        "compile_s": r.times.get("compile"),
        "roofline_s": r.roofline_time_s,
        "compile_error": r.details.get("compile_baseline_error"),
        "sandbox": r.details.get("sandbox"),
        "ncu": r.details.get("ncu"),
        "first_eval_wall_s": time.monotonic() - t0,
        "phases_s": r.details.get("phases_s"),
        "profile": _profile_summary(r.profile or {}),
    }
    walls = []
    for _ in range(args.warm_evals):
        t1 = time.monotonic()
        search_mode = EvalConfig(
            target=args.target,
            machine=args.machine,
            timeout_s=args.timeout,
            gpu_profile="auto",
            extra=_ncu(args),
        )
        w = evaluate(problem.problem_path, problem.seed_path, config=search_mode)
        walls.append(time.monotonic() - t1)
        rec.setdefault("warm_memo", w.details.get("memo"))
        rec.setdefault("warm_phases_s", w.details.get("phases_s"))
        rec.setdefault("warm_ncu", w.details.get("ncu"))
    rec["warm_eval_wall_s"] = walls
    return rec


def _ncu(args: argparse.Namespace) -> dict[str, Any]:
    """`--ncu none`: no ncu anywhere (an explicit threshold of 0 s: "only if faster than 0 s")."""
    return {"ncu_if_faster_than": 0.0} if args.ncu == "none" else {}


def evaluate_without_ncu(request: Any) -> Any:
    """The search's evaluator (`kegen.search.fitness.evaluate_candidate`) with no ncu."""
    import dataclasses

    from kegen.search.fitness import Outcome

    request = dataclasses.replace(
        request,
        timeout_s=request.timeout_s or 300.0,
        overrides={**request.overrides, "extra": {"ncu_if_faster_than": 0.0}},
    )
    t0 = time.perf_counter()
    result = request.evaluate()
    return Outcome.from_result(result, duration_s=time.perf_counter() - t0)


def _profile_summary(profile: dict[str, Any]) -> dict[str, Any]:
    metrics = profile.get("metrics") or {}
    return {
        "sources": profile.get("sources"),
        "kernels": [k.get("name") for k in (profile.get("kernels") or [])[:4]],
        "bottleneck": ":".join(
            str((profile.get("bottleneck") or {}).get(k) or "") for k in ("kind", "name", "category")
        ).strip(":")
        or None,
        **{k: metrics[k] for k in PROFILE_METRICS if k in metrics},
        "notes": [str(n)[:200] for n in (profile.get("notes") or [])[:3]],
    }


def search_phase(problem: Any, args: argparse.Namespace) -> dict[str, Any]:
    """`--budget` evaluations of the offline search, in this process; per-evaluation wall times."""
    from kegen.eval.trusted import memo
    from kegen.search import SearchConfig, run_search
    from kegen.search.config import (
        EvalSliceConfig,
        OperatorConfig,
        PolicyConfig,
        StoreConfig,
        TerminationConfig,
    )
    from kegen.search.store import GraphStore

    memo.reset_best()  # the search's own "best so far" decides where ncu runs (gpu_profile="auto")
    work = Path(args.work)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    config = SearchConfig(
        problem=problem.problem_path,
        seed=problem.seed_path,
        out_dir=work / "runs" / f"{problem.name}-{stamp}",
        rng_seed=args.rng_seed,
        policy=PolicyConfig(name=args.policy),
        operator=OperatorConfig(name="offline"),
        termination=TerminationConfig(max_evaluations=args.budget, time_limit_s=args.search_time),
        eval=EvalSliceConfig(
            target=args.target,
            machine=args.machine,
            jobs=0,
            timeout_s=args.timeout,
            evaluator=f"{MODULE}:evaluate_without_ncu" if args.ncu == "none" else DEFAULT_EVALUATOR,
        ),
        store=StoreConfig(db=work / "search.db", warm_start=False),
        progress=False,
    )
    store = GraphStore(config.store.db)
    t0 = time.monotonic()
    try:
        res = run_search(config, store)
        return _search_record(store, res, args, time.monotonic() - t0)
    finally:
        store.close()


def _search_record(store: Any, res: Any, args: argparse.Namespace, elapsed: float) -> dict[str, Any]:
    nodes = sorted(store.nodes(res.run_id), key=lambda n: (n.evaluated_at or math.inf, n.id))
    evaluated = [(n, store.evaluation(n.id)) for n in nodes if n.evaluated]
    walls = [e.duration_s for n, e in evaluated if e and e.duration_s and not e.metrics.get("duplicate_of")]
    verdicts: dict[str, int] = {}
    for n, _ in evaluated:
        verdicts[n.verdict or "?"] = verdicts.get(n.verdict or "?", 0) + 1
    best = res.best
    best_ev = store.evaluation(best.id) if best is not None else None
    root_ev = store.evaluation(res.root.id)
    fits = [n.fitness if n.correct else 0.0 for n, _ in evaluated]
    top = max(fits, default=0.0)
    to_90 = next((i + 1 for i, f in enumerate(fits) if top > 0 and f >= 0.9 * top), None)
    return {
        "budget": args.budget,
        "time_limit_s": args.search_time,
        "policy": args.policy,
        "run_id": res.run_id,
        "stop_reason": res.stop_reason,
        "evaluations": res.evaluations,
        "elapsed_s": elapsed,
        "verdicts": verdicts,
        "best_node": best.id if best is not None else None,
        "best_is_seed": best is not None and best.parent_id is None,
        "best_description": best.description if best is not None else None,
        "best_speedup_over_seed": res.best_speedup,
        "best_s": best_ev.candidate_time_s if best_ev else None,
        "best_source": best.code if best is not None else None,
        "root_profile": _profile_summary(root_ev.profile if root_ev else {}),
        "best_profile": _profile_summary(best_ev.profile if best_ev else {}),
        "compile_candidate": _compile_candidate(store, res),
        "evals_to_90pct_of_best": to_90,
        "eval_wall_s": walls,
        "eval_wall_median_s": statistics.median(walls) if walls else None,
        "eval_wall_median_after_first_s": statistics.median(walls[1:]) if len(walls) > 1 else None,
    }


def _compile_candidate(store: Any, res: Any) -> dict[str, Any]:
    """Whether torch.compile's own kernels were a candidate of the search (GPU targets, issue 26) and
    whether they won (the best node is that candidate)."""
    from kegen.search.compile_candidate import OPERATOR, compile_candidate_won

    node = next((n for n in store.nodes(res.run_id) if n.operator == OPERATOR), None)
    best_id = res.best.id if res.best is not None else None
    return {
        "present": node is not None,
        "won": compile_candidate_won(store, res.run_id, best_id),
        "fitness": node.fitness if node is not None and node.evaluated else None,
    }


def native_phase(problem: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The reference in its operands' native dtype, eager and torch.compile (kegen.bench.native_dtype)."""
    from kegen.bench.native_dtype import native_baselines

    return {"status": "ok", **native_baselines(Path(problem.problem_path))}


def _wants_native(problem: Any, args: argparse.Namespace) -> bool:
    from kegen.bench.native_dtype import reference_upcasts

    return args.target in ("nvidia", "amd") and reference_upcasts(Path(problem.problem_path))


def _done(rec: dict[str, Any], phase: str, args: argparse.Namespace) -> bool:
    if phase == "native":
        return (rec.get("native") or {}).get("status") == "ok"
    if phase == "seed":  # a seed the tool failed on (not the candidate's verdict) is tried again
        return bool(rec.get("seed")) and rec["seed"].get("status") != "error"
    search = rec.get("search") or {}
    return bool(search) and (search.get("budget") or 0) >= args.budget


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="production")
    ap.add_argument("--target", default="nvidia", choices=("nvidia", "amd", "cpu", "mtia"))
    ap.add_argument("--machine", default="mtia-2i", help="mtia machine (target mtia only)")
    ap.add_argument("--only", default="", help="comma-separated problem names (default: all)")
    ap.add_argument("--skip-done", action="store_true", help="skip phases already recorded")
    ap.add_argument("--budget", type=int, default=8, help="search evaluations per problem (0: no search)")
    ap.add_argument("--search-time", type=float, default=120.0, help="wall limit of one search (s)")
    ap.add_argument("--warm-evals", type=int, default=1, help="warm re-evaluations of the seed (search mode)")
    ap.add_argument("--deadline", type=float, default=None, help="start no new phase after this many s")
    ap.add_argument("--timeout", type=float, default=300.0, help="wall limit of one evaluation (s)")
    ap.add_argument("--policy", default="greedy", choices=("uct", "greedy", "evolutionary"))
    ap.add_argument(
        "--ncu",
        default="auto",
        choices=("auto", "none"),
        help="auto: ncu on each seed and where a search's candidate improves; none: never (fastest)",
    )
    ap.add_argument(
        "--order",
        default="phases",
        choices=("phases", "problems"),
        help="phases: every seed first, then the searches (a deadline leaves baselines for all); "
        "problems: seed and search of one problem, then the next",
    )
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    ap.add_argument("--name", default=None, help="results name (default production_<target>)")
    ap.add_argument("--summary-only", action="store_true", help="only rebuild the summary from the records")
    ap.add_argument("--work", default="/tmp/kegen-production-gpu", help="search db and run directories")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from kegen.suites import find_suite

    suite = find_suite(args.suite)
    problems = suite.select([n for n in args.only.split(",") if n]).problems
    name = args.name or (
        "production_nvidia" if args.target == "nvidia" else f"production_{args.target}_logic"
    )
    out = Path(args.out)
    per_problem = out / name
    per_problem.mkdir(parents=True, exist_ok=True)
    env = {**environment(), "target": args.target}
    sys.modules.setdefault(MODULE, sys.modules[__name__])  # for the search's evaluator lookup
    started = time.monotonic()
    stopped = None
    ran = 0  # phases run by this command: the first always runs, whatever the deadline
    phases = ("seed", "native", "search")
    if args.order == "phases":
        plan = [(phase, p) for phase in phases for p in problems]
    else:
        plan = [(phase, p) for p in problems for phase in phases]
    for phase, p in plan if not args.summary_only else []:
        path = per_problem / f"{p.name}.json"
        rec = json.loads(path.read_text()) if path.is_file() else {}
        if phase == "search" and (args.budget <= 0 or (rec.get("seed") or {}).get("status") != "ok"):
            continue
        if phase == "native" and not _wants_native(p, args):
            continue
        if args.skip_done and _done(rec, phase, args):
            continue
        if args.deadline is not None and ran and time.monotonic() - started > args.deadline:
            stopped = f"deadline of {args.deadline:.0f} s reached before {p.name} ({phase})"
            break
        t0, ran = time.monotonic(), ran + 1
        try:
            run_phase = {"seed": seed_phase, "native": native_phase, "search": search_phase}[phase]
            rec[phase] = run_phase(p, args)
        except Exception as exc:  # record and go on: the file says what failed
            rec[phase] = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:500]}
        rec["environment"] = env
        path.write_text(json.dumps(rec, indent=1, default=str))
        print(
            f"{p.name} {phase}: {rec[phase].get('status', 'done')} in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
    data = write_summary(out, name, env, per_problem, {p.name: p.problem_path for p in suite.problems})
    print((out / f"{name}.md").read_text())
    if stopped:
        print(f"stopped: {stopped}; run again with --skip-done to continue")
    print(json.dumps(data["totals"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
