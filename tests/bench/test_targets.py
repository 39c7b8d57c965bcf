"""The targets table and the resumable recording (kegen.bench.record), with scripted searches.

Nothing here simulates: the searches are scripted, the store holds only a run record, so what is
tested is the bench's own logic (targets met/missed, evals to 90%, partial/done, resume, packing).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kegen.bench import adapters
from kegen.bench.markdown import format_markdown, goals_table
from kegen.bench.metrics import evals_to_fraction, summarize
from kegen.bench.record import (
    DONE,
    FAILED,
    PARTIAL,
    RecordConfig,
    assemble,
    load_record,
    pack,
    record,
    unpack,
)
from kegen.bench.results import BenchReport, ProblemResult
from kegen.bench.runner import BenchConfig, SearchOutcome, SeedEval
from kegen.bench.table import format_summary, format_table
from kegen.search.store import GraphStore
from kegen.suites import SuiteProblem, find_suite, target_roofline_for


def _row(name: str, roof: float | None, target: float | None, seed_t: float = 4e-5, best_t: float = 1e-5,
         compile_t: float | None = 2e-5, evals: int | None = 3) -> ProblemResult:
    return ProblemResult(name=name, op_class="gemm", seed_status="ok", seed_correct=True, seed_speedup=1.0,
                         seed_time_s=seed_t, best_speedup=seed_t / best_t, best_time_s=best_t, best_roofline=roof,
                         best_source="search", compile_time_s=compile_t, target_roofline=target,
                         evals_to_90=evals, best_diagnosis="memory-bound: limited by dram (memory)")


def test_evals_to_fraction_counts_after_the_seed() -> None:
    assert evals_to_fraction([1.0, None, 1.5, 3.0, 2.9]) == 3
    assert evals_to_fraction([1.0, 0.95]) == 0  # the seed itself is within 90% of the best
    assert evals_to_fraction([None, 0.0, None]) is None
    assert evals_to_fraction([1.0, 10.0, 9.5], fraction=0.9) == 1


def test_target_verdicts_speedups_and_the_table() -> None:
    rows = [_row("a", 0.85, 0.80), _row("b", 0.5, 0.85), _row("c", None, 0.8),
            ProblemResult(name="d", seed_status="incorrect", target_roofline=0.8)]
    assert [r.target_met for r in rows] == [True, False, None, False]
    assert rows[0].speedup_vs_seed == pytest.approx(4.0) and rows[0].speedup_vs_compile == pytest.approx(2.0)
    assert rows[3].speedup_vs_seed is None
    s = summarize(rows)
    assert (s.targets_set, s.targets_met, s.median_evals_to_90) == (3, 1, 3.0)
    report = BenchReport(suite="t", target="mtia", machine="mtia-2i", budget=50, jobs=1, started="x",
                         baseline="seed", problems=rows).finalize()
    table = format_table(report)
    header = table.splitlines()[0]
    for col in ("seed time", "best time", "compile", "x seed", "vs compile", "roofline", "target", "fast_1",
                "evals->90%"):
        assert col in header
    line_a = next(line for line in table.splitlines() if line.startswith("a "))
    assert ">=80% met" in line_a and "40.0 us" in line_a and "10.0 us" in line_a and "4.00x" in line_a
    assert ">=85% MISSED" in table and "INCORRECT" in table
    summary = format_summary(report)
    assert "roofline targets met on 1/3 problems (>=80%: 1/2, >=85%: 0/1)" in summary
    assert "median 3 evaluations" in summary
    goals = goals_table(report)
    assert "| GEMM-class at >= 80% of roofline | 1/2 | all | missed |" in goals
    assert "| geomean speedup over the seeds | 4.00x | >= 3x | met |" in goals
    md = format_markdown(report, "title")
    assert "**b** (gemm, best from search): 50.0% of its roofline, target >= 85%. memory-bound" in md
    assert "**d**: no correct kernel" in md and "**a**" not in md.split("## Gaps")[1]


def test_suite_targets_by_class_and_declared() -> None:
    assert target_roofline_for("gemm") == 0.80 and target_roofline_for("jagged") == 0.85
    default = find_suite("default").select(["gemm", "softmax"]).problems
    assert [p.target for p in default] == [0.80, 0.85]  # no declaration: by op class


def test_evals_to_90_prefers_the_search_count() -> None:
    result = SimpleNamespace(screening={"evals_to_90": 7}, run_id="r")
    assert adapters.evals_to_90(result, store=None) == 7


class ScriptedSearch:
    """Stops at a time limit on the first call, spends the budget when resumed; writes a real run
    record in the problem's store so the recorder can find the run to resume."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, problem: SuiteProblem, config: BenchConfig, out_dir: Path, resume: str | None = None,
                 **_: Any) -> SearchOutcome:
        self.calls.append((problem.name, resume))
        out_dir.mkdir(parents=True, exist_ok=True)
        run_id = resume
        if run_id is None:
            store = GraphStore(out_dir / "search.db")
            run_id = store.create_run(problem_path=str(problem.problem_path), problem_key="k", target="mtia",
                                      machine="mtia-2i", seed_hash=None, config={}, out_dir=str(out_dir))
            store.close()
        first = resume is None
        stop = "time limit reached (30 s of 30 s)" if first else "evaluation budget spent (5 evaluations)"
        seed = SeedEval(status="ok", speedup=1.0, baseline="seed", roofline=0.2, time_s=4e-5,
                        diagnosis="latency-bound")
        return SearchOutcome("done", evaluations=2 if first else 5, time_s=10.0, seed=seed, found_correct=True,
                             gain=2.0 if first else 4.0, best_time_s=2e-5 if first else 1e-5,
                             best_roofline=0.4 if first else 0.8, evals_to_90=1 if first else 4,
                             best_diagnosis="dram-bound", extra={"run_id": run_id, "stop_reason": stop})


def test_record_writes_partial_results_then_resumes_and_finishes(tmp_path: Path) -> None:
    search = ScriptedSearch()
    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), budget=5,
                       compile_baseline=False, skip_done=True)
    logs: list[str] = []
    (first,) = record(cfg, search_problem=search, log=logs.append)
    assert first.state == PARTIAL and first.row.search_evaluations == 2 and first.run_id
    on_disk = load_record(cfg.work_dir, "gemm")
    assert on_disk is not None and on_disk.state == PARTIAL
    (second,) = record(cfg, search_problem=search, log=logs.append)
    assert search.calls == [("gemm", None), ("gemm", first.run_id)]
    assert second.state == DONE and second.commands == 2 and second.row.search_time_s == pytest.approx(20.0)
    assert second.row.evals_to_90 == 4 and second.row.best_diagnosis == "dram-bound"
    assert second.row.target_met is True  # 0.8 against gemm's 0.80
    assert record(cfg, search_problem=search, log=logs.append) == []  # done: skipped
    assert any("already done, skipped: gemm" in m for m in logs)
    report = assemble(cfg)
    assert [p.name for p in report.problems] == ["gemm"]
    assert any(n.startswith("not recorded yet: ") and "softmax" in n for n in report.notes)


def test_recorded_again_without_skip_done_starts_a_new_search(tmp_path: Path) -> None:
    search = ScriptedSearch()
    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), budget=5, compile_baseline=False)
    record(cfg, search_problem=search, log=lambda m: None)
    record(cfg, search_problem=search, log=lambda m: None)  # resumes the partial one: done
    record(cfg, search_problem=search, log=lambda m: None)  # done, recorded again from scratch
    assert [resume is None for _, resume in search.calls] == [True, False, True]


def test_deadline_too_short_starts_nothing(tmp_path: Path) -> None:
    search = ScriptedSearch()
    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), deadline_s=60, drain_s=120)
    logs: list[str] = []
    assert record(cfg, search_problem=search, log=logs.append) == []
    assert search.calls == [] and "not started" in logs[0]


def test_pack_and_unpack_the_work_folder(tmp_path: Path) -> None:
    work = tmp_path / "w"
    (work / "gemm").mkdir(parents=True)
    (work / "gemm" / "result.json").write_text("{}")
    archive = pack(work, tmp_path / "state.tar.gz")
    elsewhere = tmp_path / "b" / "w"
    elsewhere.parent.mkdir()
    assert unpack(archive, elsewhere) and (elsewhere / "gemm" / "result.json").read_text() == "{}"
    assert not unpack(archive, elsewhere)  # present already: left alone


def test_cli_bench_suite_option_and_report_of_the_results(tmp_path: Path, monkeypatch, capsys) -> None:
    from kegen import cli

    def fake_eval(problem: SuiteProblem, config: BenchConfig) -> SeedEval:
        return SeedEval(status="ok", speedup=1.0, baseline="seed", roofline=0.9, time_s=2e-5)

    monkeypatch.setattr(adapters, "evaluate_seed", fake_eval)
    out = tmp_path / "run"
    rc = cli.main(["bench", "--suite", "production", "--problems", "gemm_fp16_512,rms_norm_fp16", "--no-search",
                   "--no-compile-baseline", "--out", str(out), "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert ">=80% met" in printed and ">=85% met" in printed and "20.0 us" in printed
    assert cli.main(["report", str(out)]) == 0
    again = capsys.readouterr().out
    assert "gemm_fp16_512" in again and "roofline targets met on 2/2 problems" in again
    assert cli.main(["bench", "default", "--suite", "production", "--out", str(out)]) == 2
    assert "two suites given" in capsys.readouterr().err


def test_an_evaluator_failure_is_not_a_result_and_is_recorded_again(tmp_path: Path) -> None:
    calls: list[str | None] = []

    def broken(problem: SuiteProblem, config: BenchConfig, out_dir: Path, resume: str | None = None,
               **_: Any) -> SearchOutcome:
        calls.append(resume)
        seed = SeedEval(status="runtime_error", message="evaluator failed: ModuleNotFoundError: x")
        return SearchOutcome("done", evaluations=5, seed=seed, extra={"stop_reason": "evaluation budget spent"})

    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), budget=5,
                       compile_baseline=False, skip_done=True)
    (rec,) = record(cfg, search_problem=broken, log=lambda m: None)
    assert rec.state == FAILED
    assert len(record(cfg, search_problem=broken, log=lambda m: None)) == 1 and calls == [None, None]
    report = assemble(cfg)
    assert report.problems == [] and any("the evaluator failed" in n for n in report.notes)


def test_a_compile_baseline_cut_by_the_deadline_is_measured_by_the_next_command(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    from kegen.bench import compile_baseline

    timeouts: list[float] = []

    def fake_measure(problem: SuiteProblem, machine: str, timeout_s: float = 600.0) -> dict[str, Any]:
        timeouts.append(timeout_s)
        if timeout_s < 600:
            return {"error": f"torch.compile on {machine} took over {timeout_s:g} s"}
        return {"seconds": 3e-5, "host_ops": []}

    monkeypatch.setattr(compile_baseline, "measure", fake_measure)

    def spent(problem: SuiteProblem, config: BenchConfig, out_dir: Path, resume: str | None = None,
              **_: Any) -> SearchOutcome:
        seed = SeedEval(status="ok", speedup=1.0, baseline="seed", roofline=0.5, time_s=4e-5)
        return SearchOutcome("done", evaluations=5, seed=seed, found_correct=True, gain=1.0,
                             extra={"stop_reason": "evaluation budget spent (5 evaluations)"})

    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), budget=5, skip_done=True,
                       deadline_s=200, drain_s=120)
    (first,) = record(cfg, search_problem=spent, log=lambda m: None)
    assert first.state == PARTIAL and "torch.compile baseline not measured yet" in first.stop_reason
    assert first.row.compile_message == "" and timeouts and timeouts[0] < 200
    later = RecordConfig(work_dir=cfg.work_dir, suite="default", only=("gemm",), budget=5, skip_done=True)
    (second,) = record(later, search_problem=spent, log=lambda m: None)
    assert second.state == DONE and second.row.compile_time_s == pytest.approx(3e-5)
    assert second.row.speedup_vs_compile == pytest.approx(0.75)


def test_compile_baseline_checks_half_precision_outputs_with_evals_tolerance() -> None:
    import torch

    from kegen.inductor.baseline import _max_error

    ref = torch.full((4,), 32.0, dtype=torch.bfloat16)
    one_ulp = ref + 0.25  # bf16 spacing at 32: within kegen eval's 1e-2 relative tolerance
    assert _max_error(one_ulp, ref) == pytest.approx(0.25)
    with pytest.raises(RuntimeError, match="disagrees"):
        _max_error(torch.ones(4) + 0.01, torch.ones(4))  # float32 keeps 1e-3


def test_sigterm_packs_the_work_folder_before_the_process_ends(tmp_path: Path) -> None:
    """A remote command's `timeout` kills the recorder while searches are in flight: the stores in
    the work folder must reach the archive (the next command resumes from them)."""
    import signal
    import subprocess
    import sys
    import tarfile
    import textwrap

    work, archive = tmp_path / "work", tmp_path / "state.tar.gz"
    (work / "gemm" / "search").mkdir(parents=True)
    (work / "gemm" / "search" / "search.db").write_text("store")
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from kegen.bench.record import pack_on_terminate
        pack_on_terminate(Path({str(work)!r}), Path({str(archive)!r}))
        print("ready", flush=True)
        time.sleep(60)  # a search in flight
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM and "packed" in out
    with tarfile.open(archive) as tar:
        assert "work/gemm/search/search.db" in tar.getnames()
    assert not (tmp_path / "state.tar.gz.partial").exists()


def test_compile_baselines_completed_for_records_that_lack_them(tmp_path: Path, monkeypatch) -> None:
    """A record whose torch.compile baseline failed (an older torch on the recording host) or was cut
    gets it measured by `complete_compile_baselines`, without searching again."""
    from kegen.bench import compile_baseline
    from kegen.bench.record import complete_compile_baselines

    answers = [{"error": "ImportError: cannot import name 'register_benchmarker'"}, {"seconds": 3e-5, "host_ops": []}]
    monkeypatch.setattr(compile_baseline, "measure", lambda problem, machine, timeout_s=600.0: answers.pop(0))

    def spent(problem: SuiteProblem, config: BenchConfig, out_dir: Path, resume: str | None = None,
              **_: Any) -> SearchOutcome:
        seed = SeedEval(status="ok", speedup=1.0, baseline="seed", roofline=0.5, time_s=4e-5)
        return SearchOutcome("done", evaluations=5, seed=seed, found_correct=True, gain=1.0,
                             extra={"stop_reason": "evaluation budget spent (5 evaluations)"})

    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm",), budget=5)
    (first,) = record(cfg, search_problem=spent, log=lambda m: None)
    assert first.row.compile_time_s is None and "register_benchmarker" in first.row.compile_message
    assert complete_compile_baselines(cfg, log=lambda m: None) == ["gemm"]
    rec = load_record(cfg.work_dir, "gemm")
    assert rec is not None and rec.row.compile_time_s == pytest.approx(3e-5) and rec.row.compile_message == ""
    assert complete_compile_baselines(cfg, log=lambda m: None) == []  # nothing left to measure


def test_searches_side_by_side_share_the_cores_among_all_their_workers(tmp_path: Path, monkeypatch) -> None:
    import os

    from kegen.executor.local import THREAD_VARS

    for var in THREAD_VARS:  # set first, so that the teardown restores what was there before
        monkeypatch.setenv(var, "0")
        monkeypatch.delenv(var)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    cfg = RecordConfig(work_dir=tmp_path / "w", suite="default", only=("gemm", "softmax"), jobs=8,
                       problems_at_once=2, compile_baseline=False)
    record(cfg, search_problem=ScriptedSearch(), log=lambda m: None)
    # two pools of 4 workers: 2 threads each (a pool alone would have given its 4 workers 4 each)
    assert all(os.environ[var] == "2" for var in THREAD_VARS)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # a user's setting wins
    record(cfg, search_problem=ScriptedSearch(), log=lambda m: None)
    assert os.environ["OMP_NUM_THREADS"] == "5"
