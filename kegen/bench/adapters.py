"""The bench's bridges to kegen's evaluator (`kegen.eval.evaluate`) and search (`kegen.search.run_search`).

Seeds are evaluated without a baseline file, so their speedup is over whatever baseline
`kegen.eval` measures for the target (its `speedups["baseline"]`, else `["eager"]`); when the
target has none, the seed is the baseline (speedup 1.0). Searches score children against the seed,
so a search's gain multiplies the seed's speedup.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from kegen.bench.config import BenchConfig, SearchOutcome, SeedEval
from kegen.bench.results import SEARCH_DONE
from kegen.suites import SuiteProblem

BASELINE_KEYS = ("baseline", "eager")


def evaluate_seed(problem: SuiteProblem, config: BenchConfig) -> SeedEval:
    """Evaluate a problem's seed with `kegen.eval` on the bench's target."""
    from kegen.eval import EvalConfig, evaluate

    overrides: dict[str, Any] = {"target": config.target, "machine": config.machine}
    if config.eval_timeout_s is not None:
        overrides["timeout_s"] = config.eval_timeout_s
    result = evaluate(problem.problem_path, problem.seed_path, config=EvalConfig.from_settings(**overrides))
    return seed_eval_from_result(result)


def seed_eval_from_result(result: Any) -> SeedEval:
    """Map an EvalResult onto what the bench keeps."""
    status = str(getattr(result.status, "value", result.status))
    speedups: dict[str, float] = dict(result.speedups or {})
    name, speedup = next(((k, speedups[k]) for k in BASELINE_KEYS if speedups.get(k)), ("seed", None))
    cand = result.candidate_time_s
    if speedup is None and status == "ok":
        speedup = 1.0
    roof = speedups.get("roofline")
    if roof is None and cand and result.roofline_time_s:
        roof = result.roofline_time_s / cand
    return SeedEval(status=status, message=result.message or "", speedup=speedup if status == "ok" else None,
                    baseline=name, roofline=roof if status == "ok" else None, time_s=cand,
                    baseline_time_s=result.baseline_time_s, roofline_time_s=result.roofline_time_s,
                    wall_s=float(result.wall_time_s or 0.0), diagnosis=diagnosis_text(result.profile))


def diagnosis_text(profile: dict[str, Any] | None) -> str:
    """One line from a stored profile: limiter, roofline, idle PEs, utilisation, top stalls ("" if none)."""
    if not profile:
        return ""
    from kegen.profiling.diagnosis import diagnose
    from kegen.profiling.render import diagnosis_line

    try:
        text = diagnosis_line(diagnose(profile))
    except Exception as exc:  # a profile the diagnosis cannot read must not fail the bench
        return f"diagnosis failed: {type(exc).__name__}: {exc}"
    return "" if text == "no profile available" else text


def evals_to_90(result: Any, store: Any) -> int | None:
    """Evaluations after the seed's until the search's best so far reached 90% of its final best
    fitness: the search's own count (`SearchResult.screening`, which leaves out what screening
    skipped) when it keeps one, else counted from the store in the order evaluations finished."""
    screening = getattr(result, "screening", None) or {}
    if "evals_to_90" in screening:
        value = screening["evals_to_90"]
        return int(value) if value is not None else None
    from kegen.bench.metrics import evals_to_fraction

    done = sorted(store.nodes(result.run_id, status="done"),
                  key=lambda n: (n.parent_id is not None, n.evaluated_at or 0.0, n.id))
    return evals_to_fraction([n.fitness if n.correct else None for n in done], 0.9)


def search_unavailable() -> str | None:
    """None if `kegen.search.run_search` can be imported, else why not."""
    try:
        from kegen.search import run_search  # noqa: F401
    except Exception as exc:
        return f"kegen.search.run_search is not available ({type(exc).__name__}: {exc})"
    return None


def search_problem(problem: SuiteProblem, config: BenchConfig, out_dir: Path,
                   executor: Any = None, resume: str | None = None) -> SearchOutcome:
    """Search `problem` from its seed with `config.budget` evaluations; report the best correct kernel.
    `executor`: a shared `kegen.executor` executor to evaluate on (else the search makes its own);
    `resume`: the id of an earlier run of this problem in `out_dir`'s store to continue."""
    from kegen.search import SearchConfig, run_search

    base = SearchConfig.default(problem.problem_path)
    if config.operator:
        base = replace(base, operator=replace(base.operator, name=config.operator))
    search_config = replace(
        base,
        seed=problem.seed_path,
        out_dir=out_dir,
        resume=resume,
        termination=replace(base.termination, max_evaluations=config.budget,
                            time_limit_s=config.search_time_limit_s),
        eval=replace(base.eval, target=config.target, machine=config.machine, jobs=config.jobs,
                     timeout_s=config.eval_timeout_s),
        store=replace(base.store, db=out_dir / "search.db", warm_start=False),
        progress=False,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    result = run_search(search_config, executor=executor)
    return search_outcome_from_result(result, out_dir)


def search_outcome_from_result(result: Any, out_dir: Path) -> SearchOutcome:
    """Read a `kegen.search.SearchResult` and its store: the root's evaluation (= the seed's), the
    evaluations spent, and the best correct node's speedup over the seed, simulated time, roofline
    fraction and kernel (written to `out_dir`/best.py)."""
    from kegen.search.store import GraphStore

    outcome = SearchOutcome(state=SEARCH_DONE, evaluations=int(result.evaluations),
                            time_s=float(result.elapsed_s), message=str(result.stop_reason or ""),
                            extra={"run_id": result.run_id, "stop_reason": str(result.stop_reason or "")})
    best = result.best if result.best is not None and result.best.correct else None
    store = GraphStore(result.db)
    try:
        root = result.root
        root_eval = store.evaluation(root.id) if root is not None else None
        best_eval = store.evaluation(best.id) if best is not None else None
        outcome.evals_to_90 = evals_to_90(result, store) if best is not None else None
    finally:
        store.close()
    if root_eval is not None:
        outcome.seed = _seed_from_evaluation(root_eval)
    if best is None:
        outcome.message = (outcome.message + "; no correct kernel").strip("; ")
        return outcome
    outcome.found_correct = True
    if outcome.seed is not None and outcome.seed.status == "ok":
        outcome.gain = float(best.speedup if best.speedup is not None else best.fitness)
    if best_eval is not None:
        outcome.best_time_s = best_eval.candidate_time_s
        outcome.best_roofline = best_eval.roofline_fraction
        outcome.best_diagnosis = diagnosis_text(best_eval.profile)
    if best.code:
        path = out_dir / "best.py"
        path.write_text(best.code)
        outcome.best_path = str(path)
    outcome.extra.update(best_node=best.id, best_description=best.description)
    return outcome


def _seed_from_evaluation(ev: Any) -> SeedEval:
    """The seed's result from the search's evaluation of its root (timed against itself: speedup 1)."""
    ok = ev.status == "ok"
    return SeedEval(status=ev.status, message=ev.message or "", speedup=1.0 if ok else None, baseline="seed",
                    roofline=ev.roofline_fraction if ok else None, time_s=ev.candidate_time_s,
                    baseline_time_s=ev.baseline_time_s,
                    roofline_time_s=(ev.metrics or {}).get("roofline_time_s"),
                    wall_s=float(ev.duration_s or 0.0), diagnosis=diagnosis_text(ev.profile) if ok else "")
