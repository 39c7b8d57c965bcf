"""Run a suite: evaluate every seed, then search each problem, and collect a BenchReport.

With the search on, each problem's search starts by evaluating the seed (its root node), and that
evaluation is the seed's result; the search then spends the rest of the budget on children, with
`jobs` evaluation workers. Without the search, seeds are evaluated `jobs` at a time (each
evaluation runs in its own sandbox process). The evaluation and search functions are parameters
so tests (and other targets) can supply their own.
"""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kegen.bench import adapters
from kegen.bench.config import BenchConfig, EvaluateSeed, SearchOutcome, SearchProblem, SeedEval
from kegen.bench.host import describe_host
from kegen.bench.results import (
    SEARCH_DONE,
    SEARCH_FAILED,
    SEARCH_NOT_RUN,
    BenchReport,
    ProblemResult,
    write_json,
)
from kegen.suites import Suite, SuiteProblem, find_suite


def default_out_dir() -> Path:
    return Path("runs") / f"bench-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def run_bench(config: BenchConfig, *, evaluate_seed: EvaluateSeed | None = None,
              search_problem: SearchProblem | None = None) -> BenchReport:
    """Evaluate each seed and search each problem (a search's root evaluation is its seed's result);
    return the finished report. With `time_limit_s`, problems not started in time are left out and
    named in the report's notes."""
    suite: Suite = find_suite(config.suite).select(list(config.problems))
    out_dir = config.out_dir or default_out_dir()
    evaluate_seed = evaluate_seed or adapters.evaluate_seed
    notes: list[str] = []
    if not config.search or config.budget == 0:
        notes.append("search not run: " + ("disabled (--no-search)" if not config.search else "budget 0"))
        search_problem = None
    elif search_problem is None:
        reason = adapters.search_unavailable()
        if reason:
            notes.append(f"search not run: {reason}")
        else:
            search_problem = adapters.search_problem
    started = time.monotonic()
    report = BenchReport(suite=suite.name, target=config.target, machine=config.machine, budget=config.budget,
                         jobs=config.jobs, started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                         host=describe_host(), notes=notes)
    bar = _progress(len(suite.problems), config.progress)
    shared = _shared_executor(config)
    try:
        if search_problem is None:
            if shared is not None and evaluate_seed is adapters.evaluate_seed:
                seeds = _evaluate_seeds_on(shared, suite, config, bar)
            else:
                seeds = _evaluate_seeds(suite, config, evaluate_seed, bar)
            report.problems = [_row(p, seed) for p, seed in zip(suite.problems, seeds, strict=True)]
        elif shared is not None:
            _search_spread(suite, config, out_dir, search_problem, evaluate_seed, shared, report, bar,
                           started)
        else:
            _search_in_turn(suite, config, out_dir, search_problem, evaluate_seed, report, bar, started)
    finally:
        bar.close()
        if shared is not None:
            shared.shutdown()
    if config.compile_baseline and config.target == "mtia":
        from kegen.bench.compile_baseline import add_compile_baselines

        add_compile_baselines(report.problems, list(suite.problems), config.machine)
    report.baseline = next((p.seed_baseline for p in report.problems if p.seed_baseline), "seed")
    report.wall_s = time.monotonic() - started
    return report.finalize()


def _search_in_turn(suite: Suite, config: BenchConfig, out_dir: Path, search_problem: SearchProblem,
                    evaluate_seed: EvaluateSeed, report: BenchReport, bar: Any, started: float) -> None:
    """One problem's search after another, each with `jobs` evaluation workers of its own."""
    for i, problem in enumerate(suite.problems):
        left = [p.name for p in suite.problems[i:]]
        if i and _out_of_time(config, started):
            report.notes.append(f"time limit {config.time_limit_s:g} s reached; not run: {', '.join(left)}")
            break
        bar.set_postfix_str(f"search {problem.name}")
        try:
            outcome = _search(problem, config, out_dir, search_problem)
            seed = outcome.seed or _evaluate_one(problem, config, evaluate_seed)
        except KeyboardInterrupt:
            report.notes.append(f"interrupted; not run: {', '.join(left)}")
            break
        row = _row(problem, seed)
        _apply_search(row, outcome)
        report.problems.append(row)
        bar.update(1)
        if config.out_dir is not None:  # what is done so far survives a killed run
            write_json(report, config.out_dir / "partial.json")


def _search_spread(suite: Suite, config: BenchConfig, out_dir: Path, search_problem: SearchProblem,
                   evaluate_seed: EvaluateSeed, shared: Any, report: BenchReport, bar: Any,
                   started: float) -> None:
    """Problems' searches side by side (driver threads), all evaluating on one shared executor."""
    skipped: list[str] = []

    def one(problem: SuiteProblem) -> ProblemResult | None:
        if _out_of_time(config, started):
            skipped.append(problem.name)
            return None
        outcome = _search(problem, config, out_dir, search_problem, shared)
        row = _row(problem, outcome.seed or _evaluate_one(problem, config, evaluate_seed))
        _apply_search(row, outcome)
        bar.update(1)
        return row

    with ThreadPoolExecutor(max_workers=max(1, min(shared.slots, len(suite.problems)))) as pool:
        rows = list(pool.map(one, suite.problems))
    report.problems = [r for r in rows if r is not None]
    if skipped:
        names = ", ".join(p.name for p in suite.problems if p.name in skipped)
        report.notes.append(f"time limit {config.time_limit_s:g} s reached; not run: {names}")


def _out_of_time(config: BenchConfig, started: float) -> bool:
    return config.time_limit_s is not None and time.monotonic() - started > config.time_limit_s


def _shared_executor(config: BenchConfig) -> Any:
    """A Ray executor shared by every evaluation of the bench, or None (local: each search its own pool)."""
    if config.executor == "local":
        return None
    from kegen.executor import ExecutorSpec, make_executor

    return make_executor(ExecutorSpec(config.executor, config.jobs, config.ray_address, config.target))


def _evaluate_seeds_on(executor: Any, suite: Suite, config: BenchConfig, bar: Any) -> list[SeedEval]:
    """Every seed as one task on `executor`; a task lost for good is an infrastructure error."""
    from kegen.eval import EvalResult
    from kegen.eval.request import EvalRequest
    from kegen.executor import INFRA_STATUS, FileRef, InfrastructureError, evaluate_result_task

    requests = [
        EvalRequest(FileRef.of(p.problem_path), p.seed_path.read_text(), target=config.target,
                    machine=config.machine, timeout_s=config.eval_timeout_s)
        for p in suite.problems
    ]  # fmt: skip
    futures = [executor.submit(evaluate_result_task, r) for r in requests]
    seeds: list[SeedEval] = []
    for problem, fut in zip(suite.problems, futures, strict=True):
        try:
            seed = adapters.seed_eval_from_result(EvalResult.from_dict(fut.result()))
        except InfrastructureError as exc:
            seed = SeedEval(status=INFRA_STATUS, message=str(exc))
        except Exception as exc:  # a broken problem must not stop the suite
            seed = SeedEval(status="error", message=f"{type(exc).__name__}: {exc}")
        bar.set_postfix_str(f"eval {problem.name}")
        bar.update(1)
        seeds.append(seed)
    return seeds


def _evaluate_one(problem: SuiteProblem, config: BenchConfig, evaluate_seed: EvaluateSeed) -> SeedEval:
    start = time.monotonic()
    try:
        result = evaluate_seed(problem, config)
    except Exception as exc:  # a broken problem must not stop the suite
        result = SeedEval(status="error", message=f"{type(exc).__name__}: {exc}")
    result.wall_s = result.wall_s or time.monotonic() - start
    return result


def _evaluate_seeds(suite: Suite, config: BenchConfig, evaluate_seed: EvaluateSeed,
                    bar: Any) -> list[SeedEval]:
    def one(problem: SuiteProblem) -> SeedEval:
        result = _evaluate_one(problem, config, evaluate_seed)
        bar.set_postfix_str(f"eval {problem.name}")
        bar.update(1)
        return result

    if config.jobs == 1:
        return [one(p) for p in suite.problems]
    with ThreadPoolExecutor(max_workers=config.jobs) as pool:
        return list(pool.map(one, suite.problems))


def _search(problem: SuiteProblem, config: BenchConfig, out_dir: Path,
            search_problem: SearchProblem, shared: Any = None) -> SearchOutcome:
    start = time.monotonic()
    extra = {"executor": shared} if shared is not None else {}
    try:
        outcome = search_problem(problem, config, out_dir / "search" / problem.name, **extra)
    except Exception as exc:  # one failing search must not stop the suite
        outcome = SearchOutcome(SEARCH_FAILED, message=f"{type(exc).__name__}: {exc}")
    outcome.time_s = outcome.time_s or time.monotonic() - start
    return outcome


def _row(problem: SuiteProblem, seed: SeedEval) -> ProblemResult:
    ok = seed.status == "ok"
    return ProblemResult(
        name=problem.name, op_class=problem.op_class, kind=problem.kind, dtype=problem.dtype,
        seed_status=seed.status, seed_correct=ok, seed_speedup=seed.speedup, seed_roofline=seed.roofline,
        seed_time_s=seed.time_s, baseline_time_s=seed.baseline_time_s, roofline_time_s=seed.roofline_time_s,
        seed_eval_s=round(seed.wall_s, 3), seed_message=seed.message[:500], seed_baseline=seed.baseline,
        best_speedup=seed.speedup if ok else None, best_roofline=seed.roofline if ok else None,
        best_time_s=seed.time_s if ok else None, best_path=str(problem.seed_path) if ok else "",
        target_roofline=problem.target, best_diagnosis=seed.diagnosis if ok else "",
    )


def _apply_search(row: ProblemResult, outcome: SearchOutcome) -> None:
    row.search_state = outcome.state
    row.search_evaluations = outcome.evaluations
    row.search_time_s = round(outcome.time_s, 3)
    row.search_message = outcome.message[:500]
    if outcome.state != SEARCH_DONE or not outcome.found_correct:
        return
    row.evals_to_90 = outcome.evals_to_90
    if outcome.best_diagnosis and (not row.seed_correct or (outcome.gain or 0.0) > 1.0):
        row.best_diagnosis = outcome.best_diagnosis[:500]  # the search's kernel is the best one
    if not row.seed_correct:  # the search repaired a broken seed: no speedup over it to speak of
        row.best_source, row.best_time_s, row.best_path = "search", outcome.best_time_s, outcome.best_path
        row.best_roofline = outcome.best_roofline
        return
    if outcome.gain is None or outcome.gain <= 1.0:
        return
    row.best_source = "search"
    row.best_speedup = row.seed_speedup * outcome.gain if row.seed_speedup else outcome.gain
    row.best_time_s = outcome.best_time_s
    if outcome.best_roofline is not None:
        row.best_roofline = outcome.best_roofline
    elif row.seed_roofline is not None:
        row.best_roofline = row.seed_roofline * outcome.gain
    row.best_path = outcome.best_path


class _NoBar:
    def update(self, n: int = 1) -> None:
        return None

    def set_postfix_str(self, s: str) -> None:
        return None

    def close(self) -> None:
        return None


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc="bench", unit="step", dynamic_ncols=True)


__all__ = ["SEARCH_NOT_RUN", "BenchConfig", "SearchOutcome", "SeedEval", "default_out_dir", "run_bench"]
