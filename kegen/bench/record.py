"""Resumable recording of a suite: problem by problem, each result written as soon as it exists.

For machines with a per-command time limit (the GPU host: 10 minutes a command). Each problem has
a folder `<work_dir>/<problem>/` holding its search store and `result.json` (the bench row, with
`state` "done" or "partial"). A command searches each problem it starts for at most what is left
of its own `deadline_s` (less `drain_s`, the time in-flight evaluations need to finish), and starts
no problem with too little time left. The next command resumes a partial search from its store
(`kegen.search` resume: evaluated nodes are kept, pending ones evaluated, the evaluation count
carried on), so a 50-evaluation search may span several commands. A command killed outright
loses only its evaluations in flight.

    cfg = RecordConfig(work_dir=Path("runs/production-mtia"), budget=50, jobs=16, deadline_s=540)
    record(cfg)                      # search what is not done yet
    report = assemble(cfg)           # every recorded problem as one BenchReport
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.bench.host import describe_host
from kegen.bench.results import SEARCH_DONE, BenchReport, ProblemResult
from kegen.bench.runner import BenchConfig, SearchOutcome, run_bench
from kegen.executor.local import share_threads
from kegen.suites import SuiteProblem, find_suite

RESULT_FILE = "result.json"
DONE = "done"
PARTIAL = "partial"
FAILED = "failed"  # the evaluator itself failed (not the kernel): recorded again from scratch next time
TIME_LIMIT_STOP = "time limit"
INFRA_MARKERS = ("evaluator failed", "infrastructure")
COMPILE_MIN_S = 45.0  # the least time worth starting a torch.compile baseline in


@dataclass(frozen=True)
class RecordConfig:
    """What to record, where, and how much time a command may take."""

    work_dir: Path
    suite: str = "production"
    target: str = "mtia"
    machine: str = "mtia-2i"
    budget: int = 50
    jobs: int = 1
    problems_at_once: int = 1  # searches side by side; each gets jobs // problems_at_once workers
    only: tuple[str, ...] = ()
    skip_done: bool = False  # leave problems already recorded as done alone (else record them again)
    deadline_s: float | None = None  # the whole command's time; None = no limit
    drain_s: float = 120.0  # kept free at the deadline for evaluations in flight to finish
    eval_timeout_s: float | None = None
    compile_baseline: bool = True  # torch.compile on the target, once a problem's search is done
    operator: str = "offline"

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"budget must be >= 1 evaluation per problem, got {self.budget}")
        if self.jobs < 1 or self.problems_at_once < 1:
            raise ValueError("jobs and problems_at_once must be >= 1")


@dataclass
class ProblemRecord:
    """One problem's recorded state (`<work_dir>/<problem>/result.json`)."""

    name: str
    state: str
    row: ProblemResult
    run_id: str = ""
    stop_reason: str = ""
    commands: int = 0  # how many commands worked on it
    updated: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "run_id": self.run_id,
                "stop_reason": self.stop_reason, "commands": self.commands, "updated": self.updated,
                "extra": self.extra, "row": self.row.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemRecord:
        return cls(name=data["name"], state=data["state"], row=ProblemResult.from_dict(data["row"]),
                   run_id=data.get("run_id", ""), stop_reason=data.get("stop_reason", ""),
                   commands=int(data.get("commands", 0)), updated=data.get("updated", ""),
                   extra=dict(data.get("extra") or {}))


def load_record(work_dir: Path, name: str) -> ProblemRecord | None:
    path = work_dir / name / RESULT_FILE
    if not path.is_file():
        return None
    return ProblemRecord.from_dict(json.loads(path.read_text()))


def save_record(work_dir: Path, record: ProblemRecord) -> Path:
    path = work_dir / record.name / RESULT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record.updated = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_dict(), indent=2) + "\n")
    tmp.replace(path)  # a command killed while writing leaves the previous record
    return path


def search_dir(work_dir: Path, name: str) -> Path:
    """Where the bench runner keeps a problem's search (store `search.db`, `best.py`)."""
    return work_dir / name / "search" / name


def last_run(work_dir: Path, name: str) -> str | None:
    """The id of the last search run in the problem's store (None: no store or no run)."""
    db = search_dir(work_dir, name) / "search.db"
    if not db.is_file():
        return None
    from kegen.search.store import GraphStore

    store = GraphStore(db)
    try:
        runs = store.list_runs()
    finally:
        store.close()
    return runs[-1].id if runs else None


def record(cfg: RecordConfig, *, search_problem: Any = None, log: Any = print) -> list[ProblemRecord]:
    """Search every selected problem not yet done (resuming partial ones) within the deadline; the
    records written. `search_problem`: the bench's search adapter (tests pass a scripted one)."""
    started = time.monotonic()
    problems = list(find_suite(cfg.suite).select(list(cfg.only)).problems)
    todo = [p for p in problems if not (cfg.skip_done and _is_done(cfg.work_dir, p.name))]
    skipped = [p.name for p in problems if p not in todo]
    if skipped:
        log(f"already done, skipped: {', '.join(skipped)}")

    def one(problem: SuiteProblem) -> ProblemRecord | None:
        left = _time_left(cfg, started)
        if left is not None and left < cfg.drain_s + 30:
            log(f"{problem.name}: not started ({left:.0f} s left of the command's deadline)")
            return None
        return record_problem(problem, cfg, left, search_problem=search_problem, log=log)

    if cfg.problems_at_once == 1:
        out = [one(p) for p in todo]
    else:
        # each search's pool has jobs // problems_at_once workers; side by side they are cfg.jobs, so
        # each gets cores // cfg.jobs threads (8 pools of 2 on 16 cores gave 8 each: 128 threads)
        share_threads(cfg.jobs)
        with ThreadPoolExecutor(max_workers=cfg.problems_at_once) as pool:
            out = list(pool.map(one, todo))
    return [r for r in out if r is not None]


def record_problem(problem: SuiteProblem, cfg: RecordConfig, time_left_s: float | None, *,
                   search_problem: Any = None, log: Any = print) -> ProblemRecord:
    """One command's work on one problem: a new search, or the resumption of a partial one."""
    from kegen.bench import adapters

    prior = load_record(cfg.work_dir, problem.name)
    # a search not recorded as done (cut at a time limit, or its command killed) is continued; a
    # resumed run that had already spent its budget stops at once with its results
    fresh = prior is not None and prior.state in (DONE, FAILED)
    resume = None if fresh else last_run(cfg.work_dir, problem.name)
    if resume is None and (cfg.work_dir / problem.name / "search").exists():
        shutil.rmtree(cfg.work_dir / problem.name / "search")  # recorded again: start afresh
    slice_s = None if time_left_s is None else max(30.0, time_left_s - cfg.drain_s)
    jobs = max(1, cfg.jobs // cfg.problems_at_once)
    bench_cfg = BenchConfig(
        suite=cfg.suite, target=cfg.target, machine=cfg.machine, budget=cfg.budget, jobs=jobs,
        problems=(problem.name,), search_time_limit_s=slice_s, eval_timeout_s=cfg.eval_timeout_s,
        out_dir=cfg.work_dir / problem.name, progress=False, compile_baseline=False, operator=cfg.operator,
    )
    seen: list[SearchOutcome] = []
    inner = search_problem or adapters.search_problem

    def search(p: SuiteProblem, config: BenchConfig, out_dir: Path, **kw: Any) -> SearchOutcome:
        outcome: SearchOutcome = inner(p, config, out_dir, resume=resume, **kw)
        seen.append(outcome)
        return outcome

    log(f"{problem.name}: {'resuming ' + resume if resume else 'searching'} "
        f"(budget {cfg.budget}, {jobs} jobs" + (f", {slice_s:.0f} s)" if slice_s else ")"))
    t0 = time.monotonic()
    report = run_bench(bench_cfg, search_problem=search)
    row = report.problems[0]
    outcome = seen[0] if seen else None
    stop = str(outcome.extra.get("stop_reason", "")) if outcome is not None else row.search_message
    partial = stop.startswith(TIME_LIMIT_STOP) and row.search_evaluations < cfg.budget
    if prior is not None and resume:  # time spent in earlier commands on the same search
        row.search_time_s = round(row.search_time_s + prior.row.search_time_s, 3)
    state = PARTIAL if partial or row.search_state != SEARCH_DONE else DONE
    if infra_failure(row):
        state = FAILED
    if state == DONE and cfg.compile_baseline and cfg.target == "mtia":
        left = None if time_left_s is None else time_left_s - (time.monotonic() - t0)
        if not _compile_baseline(row, problem, cfg.machine, left):
            state, stop = PARTIAL, "torch.compile baseline not measured yet (command deadline)"
    rec = ProblemRecord(name=problem.name, state=state, row=row,
                        run_id=str(outcome.extra.get("run_id", "")) if outcome else "", stop_reason=stop,
                        commands=(prior.commands if prior and resume else 0) + 1,
                        extra={"wall_s": round(time.monotonic() - t0, 1), "notes": report.notes})
    save_record(cfg.work_dir, rec)
    log(f"{problem.name}: {state} after {row.search_evaluations} evaluations ({stop or row.search_message})")
    return rec


def _compile_baseline(row: ProblemResult, problem: SuiteProblem, machine: str, left_s: float | None) -> bool:
    """Measure torch.compile for `row` within `left_s`; False when the deadline left no time for it
    (or cut it short): the next command measures it."""
    from kegen.bench.compile_baseline import TIMEOUT_S, add_compile_baselines

    timeout = TIMEOUT_S if left_s is None else min(TIMEOUT_S, left_s - 15)
    if timeout < COMPILE_MIN_S:
        return False
    add_compile_baselines([row], [problem], machine, timeout)
    cut = timeout < TIMEOUT_S and row.compile_time_s is None and "took over" in row.compile_message
    if cut:
        row.compile_message = ""
    return not cut


def complete_compile_baselines(cfg: RecordConfig, log: Any = print) -> list[str]:
    """Measure torch.compile for recorded problems whose baseline is missing (cut by a deadline) or
    failed (e.g. an incompatible torch on the recording host); a record left partial only for want
    of that baseline becomes done. Returns the problems measured."""
    measured = []
    for p in find_suite(cfg.suite).select(list(cfg.only)).problems:
        rec = load_record(cfg.work_dir, p.name)
        if rec is None or rec.state == FAILED or rec.row.compile_time_s is not None:
            continue
        if not rec.row.seed_correct:
            continue
        rec.row.compile_message = ""
        _compile_baseline(rec.row, p, cfg.machine, None)
        if rec.state == PARTIAL and rec.stop_reason.startswith("torch.compile baseline not measured"):
            rec.state, rec.stop_reason = DONE, "evaluation budget spent; torch.compile measured later"
        save_record(cfg.work_dir, rec)
        measured.append(p.name)
        log(f"{p.name}: torch.compile {rec.row.compile_time_s or rec.row.compile_message}")
    return measured


def infra_failure(row: ProblemResult) -> bool:
    """Whether the seed's evaluation failed in the evaluator rather than in the kernel (a broken
    install, a crashed device): such a record says nothing about the problem."""
    message = row.seed_message.lower()
    status = row.seed_status in ("error", "infra_error")
    return not row.correct and (status or any(m in message for m in INFRA_MARKERS))


def assemble(cfg: RecordConfig) -> BenchReport:
    """Every recorded problem of the suite (in suite order) as one report; the notes name the
    problems that are partial or not recorded yet."""
    suite = find_suite(cfg.suite)
    report = BenchReport(suite=suite.name, target=cfg.target, machine=cfg.machine, budget=cfg.budget,
                         jobs=cfg.jobs, started=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                         host=describe_host(), baseline="seed")
    missing: list[str] = []
    for p in suite.problems:
        rec = load_record(cfg.work_dir, p.name)
        if rec is None:
            missing.append(p.name)
            continue
        if rec.state == FAILED:
            report.notes.append(f"{p.name}: the evaluator failed ({rec.row.seed_message[:200]}); "
                                "not a result")
            continue
        if rec.state != DONE:
            report.notes.append(f"{p.name}: partial ({rec.row.search_evaluations} of {cfg.budget} "
                                f"evaluations so far; {rec.stop_reason or rec.row.search_message})")
        report.problems.append(rec.row)
        report.wall_s += rec.row.search_time_s
    if missing:
        report.notes.append(f"not recorded yet: {', '.join(missing)}")
    return report.finalize()


def pack(work_dir: Path, archive: Path) -> Path:
    """The work folder as one .tar.gz (what a remote command hands back to be carried to the next);
    written beside and renamed, so an interrupted pack leaves the previous archive whole."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(work_dir, arcname=work_dir.name)
    os.replace(partial, archive)
    return archive


def pack_on_terminate(work_dir: Path, archive: Path, log: Any = print) -> Callable[[int, Any], None]:
    """Make SIGTERM (a remote command's `timeout`, a scheduler's kill) pack the work folder before the
    process ends: the search stores inside are resumable, so a command killed while evaluations are
    still in flight loses those evaluations only, not every search it ran. Returns the handler."""

    def handler(signum: int, _frame: Any) -> None:
        if work_dir.is_dir():
            pack(work_dir, archive)
            log(f"terminated (signal {signum}): packed {work_dir} into {archive}; run again to resume")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    return handler


def unpack(archive: Path, work_dir: Path) -> bool:
    """Restore a work folder packed by `pack` (only when the folder does not exist yet)."""
    if work_dir.exists() or not archive.is_file():
        return False
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(work_dir.parent, filter="data")
        extracted = work_dir.parent / tar.getnames()[0].split("/")[0]
    if extracted != work_dir:
        extracted.rename(work_dir)
    return True


def _is_done(work_dir: Path, name: str) -> bool:
    rec = load_record(work_dir, name)
    return rec is not None and rec.state == DONE


def _time_left(cfg: RecordConfig, started: float) -> float | None:
    return None if cfg.deadline_s is None else cfg.deadline_s - (time.monotonic() - started)
