"""Ablation: the offline operator with the profile diagnosis vs with it withheld.

Both arms run the same search (same policy, budget, rng seeds and evaluator) on each problem of
a suite; the only difference is `OfflineOperator(use_diagnosis=...)`: with it, mutations are
scored by the remedies of the parent's measured bottleneck; without, by priors, learned family
gains and noise only. Evaluations are memoised by (problem, code) — the simulator is
deterministic, so an arm that reaches a candidate the other arm already measured gets the same
outcome without paying for it again. `--evaluator local` (the default) measures in this process
(`kegen.profiling.local_run`: the offline operator's mutations are trusted code, and the simulator
gives the same cycles in or out of a sandbox); `--evaluator sandboxed` uses `kegen.eval` as the
search does (slower: a worker process per evaluation).

Reported per problem and arm: the best speedup over the seed, and the evaluations needed to first
reach that best; then the geomean speedup per arm and the wins/ties/losses. Prints a table and
writes JSON.

    .venv/bin/python tools/ablation_diagnosis.py --problems softmax,gemm --budget 8 --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("diagnosis", "withheld")
_CACHE: dict[str, dict[str, Any]] = {}
_STATS = {"hits": 0, "misses": 0}


_EVALUATOR = {"name": "local"}


def local_evaluate(request: Any) -> Any:
    """An evaluator (`evaluate_candidate`'s signature) that measures in this process."""
    import dataclasses

    problem, code, machine = request.problem.path, request.code, request.machine
    baseline = request.baseline
    from kegen.profiling.local_run import run_candidate
    from kegen.search.fitness import Outcome

    run = run_candidate(Path(problem), code, machine)
    if run.status != "ok" or not run.time_s:
        return Outcome(status=run.status, message=run.message)
    base_t = run.time_s
    if baseline is not None:
        base = cached_evaluate(dataclasses.replace(request, code=baseline.text, baseline=None))
        base_t = base.candidate_time_s or run.time_s
    frac = (run.profile or {}).get("roofline", {}).get("fraction")
    return Outcome(
        status="ok", fitness=base_t / run.time_s, speedup=base_t / run.time_s, candidate_time_s=run.time_s,
        baseline_time_s=base_t, roofline_fraction=frac, profile=run.profile or {},
    )  # fmt: skip


def cached_evaluate(request: Any) -> Any:
    """The chosen evaluator, memoised by (problem, baseline, machine, code)."""
    from kegen.search.fitness import Outcome, evaluate_candidate
    from kegen.search.store import code_hash

    base = request.baseline.path if request.baseline is not None else None
    key = f"{request.problem.path}|{base}|{request.machine}|{code_hash(request.code)}"
    if key in _CACHE:
        _STATS["hits"] += 1
        return Outcome.from_dict(_CACHE[key])
    _STATS["misses"] += 1
    if _EVALUATOR["name"] == "local":
        out = local_evaluate(request)
    else:
        out = evaluate_candidate(request)
    _CACHE[key] = out.to_dict()
    return out


@dataclass
class ArmResult:
    """One search: the best speedup and how many evaluations it took to first reach it."""

    problem: str
    arm: str
    seed: int
    best: float
    evals_to_best: int
    evaluations: int
    curve: list[float] = field(default_factory=list)  # best so far after each evaluation
    best_description: str = ""


def run_one(problem_dir: Path, arm: str, seed: int, budget: int, work: Path) -> ArmResult:
    from kegen.search.config import (
        EvalSliceConfig,
        OperatorConfig,
        SearchConfig,
        StoreConfig,
        TerminationConfig,
    )
    from kegen.search.loop import SearchDriver
    from kegen.search.operators.offline import OfflineOperator
    from kegen.search.store import GraphStore

    tag = f"{problem_dir.name}-{arm}-{seed}"
    cfg = SearchConfig(
        problem=problem_dir / "problem.py",
        seed=problem_dir / "seed.py",
        out_dir=work / tag,
        rng_seed=seed,
        operator=OperatorConfig(name="offline", kb_budget_chars=0),
        termination=TerminationConfig(max_evaluations=budget),
        eval=EvalSliceConfig(jobs=0, evaluator="__main__:cached_evaluate"),
        store=StoreConfig(db=work / f"{tag}.db", warm_start=False),
        progress=False,
    )
    store = GraphStore(cfg.store.db)
    try:
        driver = SearchDriver(cfg, store)
        driver.operator = OfflineOperator(cfg.operator, seed=seed, use_diagnosis=arm == "diagnosis")
        result = driver.run()
        nodes = sorted(
            (n for n in store.nodes(result.run_id) if n.evaluated_at),
            key=lambda n: n.evaluated_at or 0.0,
        )
    finally:
        store.close()
    curve, best, first, desc = [], 0.0, 0, ""
    for i, n in enumerate(nodes, start=1):
        f = n.fitness if n.correct else 0.0
        if f > best + 1e-9:
            best, first, desc = f, i, n.description
        curve.append(best)
    return ArmResult(problem_dir.name, arm, seed, best, first, len(nodes), curve, desc)


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def summarise(results: list[ArmResult]) -> dict[str, Any]:
    """Per arm: geomean best speedup, mean evaluations to the best; per problem: who won."""
    out: dict[str, Any] = {"arms": {}, "problems": {}}
    for arm in ARMS:
        rs = [r for r in results if r.arm == arm]
        out["arms"][arm] = {
            "geomean_speedup": geomean([r.best for r in rs]),
            "mean_evals_to_best": sum(r.evals_to_best for r in rs) / len(rs) if rs else 0.0,
            "mean_best_at_half_budget": sum(r.curve[len(r.curve) // 2 - 1] for r in rs if r.curve) / len(rs)
            if rs
            else 0.0,
            "searches": len(rs),
        }
    common: dict[str, list[int]] = {arm: [] for arm in ARMS}
    for p, seed in sorted({(r.problem, r.seed) for r in results}):
        by_arm = {r.arm: r for r in results if r.problem == p and r.seed == seed}
        if len(by_arm) != len(ARMS) or min(r.best for r in by_arm.values()) <= 0:
            continue
        level = min(r.best for r in by_arm.values()) * (1 - 1e-3)  # the best both arms reached
        for arm, r in by_arm.items():
            common[arm].append(next(i for i, v in enumerate(r.curve, start=1) if v >= level))
    for arm in ARMS:
        n = common[arm]
        out["arms"][arm]["mean_evals_to_common_level"] = sum(n) / len(n) if n else 0.0
        wins = ties = losses = 0
    for p in sorted({r.problem for r in results}):
        pair = {arm: [r for r in results if r.problem == p and r.arm == arm] for arm in ARMS}
        d = geomean([r.best for r in pair["diagnosis"]])
        w = geomean([r.best for r in pair["withheld"]])
        de = sum(r.evals_to_best for r in pair["diagnosis"]) / max(len(pair["diagnosis"]), 1)
        we = sum(r.evals_to_best for r in pair["withheld"]) / max(len(pair["withheld"]), 1)
        if abs(d - w) <= 1e-3 * max(d, w):
            verdict = "tie" if abs(de - we) < 0.5 else ("faster" if de < we else "slower")
        else:
            verdict = "win" if d > w else "loss"
        wins += verdict in ("win", "faster")
        losses += verdict in ("loss", "slower")
        ties += verdict == "tie"
        out["problems"][p] = {
            "diagnosis_best": d,
            "withheld_best": w,
            "diagnosis_evals_to_best": de,
            "withheld_evals_to_best": we,
            "verdict": verdict,
        }
    out["wins"], out["ties"], out["losses"] = wins, ties, losses
    return out


def table(summary: dict[str, Any]) -> str:
    rows = [
        f"{'problem':<18} {'diag best':>10} {'held best':>10} {'diag evals':>11} {'held evals':>11}  verdict"
    ]
    for p, s in summary["problems"].items():
        rows.append(
            f"{p:<18} {s['diagnosis_best']:>9.3f}x {s['withheld_best']:>9.3f}x "
            f"{s['diagnosis_evals_to_best']:>11.1f} {s['withheld_evals_to_best']:>11.1f}  {s['verdict']}"
        )
    for arm, s in summary["arms"].items():
        rows.append(
            f"{arm:<10} geomean {s['geomean_speedup']:.3f}x, "
            f"evaluations to the best {s['mean_evals_to_best']:.2f}, "
            f"to the level both arms reached {s.get('mean_evals_to_common_level', 0.0):.2f}, "
            f"mean best at half the budget {s['mean_best_at_half_budget']:.3f}x ({s['searches']} searches)"
        )
    rows.append(
        f"diagnosis vs withheld: {summary['wins']} better, {summary['ties']} ties, {summary['losses']} worse"
    )
    return "\n".join(rows)


def merge(paths: list[Path], out: Path) -> int:
    """Summarise the runs of several earlier outputs together (other seeds or problems; a search
    repeated in a later file replaces the earlier one)."""
    docs = [json.loads(p.read_text()) for p in paths]
    latest = {(r["problem"], r["arm"], r["seed"]): r for d in docs for r in d["runs"]}  # a later file wins
    results = [ArmResult(**r) for r in latest.values()]
    summary = summarise(results)
    summary.update(
        budget=sorted({d["budget"] for d in docs}), seeds=sorted({s for d in docs for s in d["seeds"]}),
        problem_names=sorted({r.problem for r in results}), merged_from=[str(p) for p in paths],
        wall_s=sum(d["wall_s"] for d in docs), evaluator=sorted({d.get("evaluator", "?") for d in docs}),
        cache={k: sum(d["cache"][k] for d in docs) for k in ("hits", "misses")},
        runs=[r.__dict__ for r in results],
    )  # fmt: skip
    print(table(summary))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(ROOT / "kegen" / "suites" / "default"), help="suite folder")
    ap.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    ap.add_argument("--budget", type=int, default=8, help="evaluations per search (the seed included)")
    ap.add_argument("--seeds", default="0", help="comma-separated rng seeds (each arm runs each)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "ablation_diagnosis.json")
    ap.add_argument("--time-limit", type=float, default=None, help="start no new problem after S seconds")
    ap.add_argument("--evaluator", choices=("local", "sandboxed"), default="local")
    ap.add_argument("--keep", type=Path, default=None, help="keep the searches' stores in this folder")
    ap.add_argument(
        "--merge", type=Path, nargs="+", default=None, help="combine earlier JSON outputs (no runs)"
    )
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out)
    _EVALUATOR["name"] = args.evaluator
    suite = Path(args.suite)
    names = [p.strip() for p in args.problems.split(",") if p.strip()] or sorted(
        d.name for d in suite.iterdir() if (d / "problem.py").is_file() and (d / "seed.py").is_file()
    )
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    start = time.perf_counter()
    results: list[ArmResult] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kegen-ablation-") as scratch:
        tmp = str(args.keep or scratch)
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in names:
            if args.time_limit is not None and time.perf_counter() - start > args.time_limit:
                skipped.append(name)
                continue
            for seed in seeds:
                for arm in ARMS:
                    try:
                        r = run_one(suite / name, arm, seed, args.budget, Path(tmp))
                    except Exception as exc:  # a broken problem must not stop the ablation
                        print(f"{name} {arm} seed {seed}: {type(exc).__name__}: {exc}", file=sys.stderr)
                        continue
                    results.append(r)
                    print(
                        f"{name:<18} {arm:<9} seed {seed}: best {r.best:.3f}x after {r.evals_to_best} "
                        f"of {r.evaluations} evaluations ({r.best_description[:60]})",
                        flush=True,
                    )
    summary = summarise(results)
    summary.update(
        budget=args.budget, seeds=seeds, problem_names=names, skipped=skipped,
        wall_s=time.perf_counter() - start, cache=dict(_STATS), evaluator=args.evaluator,
        runs=[r.__dict__ for r in results],
    )  # fmt: skip
    print()
    print(table(summary))
    if skipped:
        print(f"skipped (time limit): {', '.join(skipped)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"wrote {args.out} ({summary['wall_s']:.0f} s, "
        f"{_STATS['misses']} evaluations, {_STATS['hits']} cached)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
