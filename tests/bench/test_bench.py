"""`kegen bench`: metrics, result files, the runner's flow and the CLI, with scripted evaluations.

The scripted evaluator and search stand in for the simulator (which these tests must not need);
what is tested is the bench's own logic: which problems are searched, how speedups combine, what
the suite metrics are, and what is written.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from kegen import cli
from kegen.bench import adapters
from kegen.bench.metrics import fast_p, geomean, summarize
from kegen.bench.plot import plot_report
from kegen.bench.results import (
    BenchReport,
    ProblemResult,
    compare,
    format_changes,
    load_json,
    write_csv,
    write_json,
)
from kegen.bench.runner import BenchConfig, SearchOutcome, SeedEval, run_bench
from kegen.bench.table import format_summary, format_table
from kegen.suites import SuiteProblem

PROBLEMS = ("gemm", "softmax", "gelu", "embedding_bag")


def _row(name: str, correct: bool, speedup: float | None, roof: float | None = 0.1,
         op_class: str = "other", seed_speedup: float | None = 1.0) -> ProblemResult:
    return ProblemResult(name=name, op_class=op_class, seed_status="ok" if correct else "incorrect",
                         seed_correct=correct, seed_speedup=seed_speedup if correct else None,
                         best_speedup=speedup if correct else None, best_roofline=roof if correct else None)


def test_geomean_and_fast_p() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    assert geomean([0.0, -1.0, float("inf")]) is None
    rows = [_row("a", True, 2.0), _row("b", True, 0.5), _row("c", False, None), _row("d", True, 1.0)]
    assert fast_p(rows, 1.0) == pytest.approx(0.25)  # only "a": correct and strictly faster
    assert fast_p(rows, 0.0) == pytest.approx(0.75)
    assert fast_p([], 1.0) == 0.0


def test_summary_counts_only_correct_problems_in_geomeans() -> None:
    rows = [_row("a", True, 4.0, 0.5, "gemm"), _row("b", True, 1.0, 0.02, "gemm"),
            _row("c", False, None, None, "jagged")]
    s = summarize(rows)
    assert (s.problems, s.correct) == (3, 2)
    assert s.pass_rate == pytest.approx(2 / 3)
    assert s.fast_1 == pytest.approx(1 / 3)
    assert s.geomean_speedup == pytest.approx(2.0)
    assert s.geomean_search_gain == pytest.approx(2.0)
    assert s.geomean_roofline_fraction == pytest.approx(0.1)
    assert s.by_op_class["gemm"]["correct"] == 2
    assert s.by_op_class["jagged"]["geomean_speedup"] is None


def _report(rows: list[ProblemResult]) -> BenchReport:
    return BenchReport(suite="t", target="mtia", machine="mtia-2i", budget=4, jobs=1, started="2026-12-02T00:00:00",
                       baseline="seed", host={"cores": 2}, problems=rows).finalize()


def test_json_round_trip_and_csv_rows(tmp_path: Path) -> None:
    rows = [_row("a", True, 3.0), _row("b", False, None)]
    rows[1].seed_message = "max abs error 1.5"
    report = _report(rows)
    back = load_json(write_json(report, tmp_path / "r.json"))
    assert back.problems == report.problems
    assert back.summary == report.summary
    with (tmp_path / "r.csv").open() if write_csv(report, tmp_path / "r.csv") else None as fh:
        table = list(csv.DictReader(fh))
    assert [r["name"] for r in table] == ["a", "b"]
    assert table[0]["correct"] == "True" and table[1]["correct"] == "False"
    assert float(table[0]["best_speedup"]) == 3.0 and table[1]["best_speedup"] == ""


def test_json_with_other_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": 0, "problems": []}))
    with pytest.raises(ValueError, match="schema"):
        load_json(path)


def test_compare_flags_regressions_first() -> None:
    before = _report([_row("a", True, 2.0), _row("b", True, 2.0), _row("c", False, None), _row("gone", True, 1.0)])
    after = _report([_row("a", False, None), _row("b", True, 3.0), _row("c", True, 1.0), _row("new", True, 1.0)])
    changes = {(c.problem, c.what) for c in compare(before, after)}
    assert changes == {("a", "became incorrect"), ("b", "faster"), ("c", "became correct"),
                       ("new", "new problem"), ("gone", "dropped")}
    text = format_changes(compare(before, after))
    assert text.splitlines()[0].startswith("REGRESSION a: became incorrect")
    assert compare(before, before) == []


class Scripted:
    """Evaluations and searches with fixed answers per problem (and a record of what was asked)."""

    SEEDS = {"gemm": "ok", "softmax": "incorrect", "gelu": "ok", "layer_norm": "compile_error"}

    def __init__(self) -> None:
        self.evaluated: list[str] = []
        self.searched: list[tuple[str, int, Path]] = []

    def seed(self, name: str) -> SeedEval:
        status = self.SEEDS[name]
        if status != "ok":
            return SeedEval(status=status, message=f"{status} at seed.py:12")
        return SeedEval(status="ok", speedup=1.0, baseline="seed", roofline=0.2, time_s=1e-5, wall_s=0.5)

    def evaluate(self, problem: SuiteProblem, config: BenchConfig) -> SeedEval:
        self.evaluated.append(problem.name)
        if problem.name == "embedding_bag":
            raise RuntimeError("simulator crashed")
        return self.seed(problem.name)

    def search(self, problem: SuiteProblem, config: BenchConfig, out_dir: Path) -> SearchOutcome:
        self.searched.append((problem.name, config.budget, out_dir))
        if problem.name == "embedding_bag":
            raise RuntimeError("search crashed")
        seed = self.seed(problem.name)
        if problem.name == "softmax":  # nothing correct found
            return SearchOutcome("done", evaluations=config.budget, seed=seed, message="budget spent")
        if problem.name == "layer_norm":  # the search repaired the seed
            return SearchOutcome("done", evaluations=config.budget, seed=seed, found_correct=True,
                                 best_roofline=0.05, best_time_s=3e-5)
        gain = {"gemm": 2.5, "gelu": 0.9}[problem.name]
        return SearchOutcome("done", evaluations=config.budget, time_s=3.0, seed=seed, found_correct=True,
                             gain=gain, best_time_s=1e-5 / gain, best_path=str(out_dir / "best.py"))


def test_runner_uses_the_search_root_as_seed_and_combines_speedups(tmp_path: Path) -> None:
    fake = Scripted()
    problems = (*PROBLEMS, "layer_norm")
    config = BenchConfig(suite="default", problems=problems, budget=3, out_dir=tmp_path, progress=False)
    report = run_bench(config, evaluate_seed=fake.evaluate, search_problem=fake.search)
    assert [s[0] for s in fake.searched] == ["gemm", "softmax", "layer_norm", "gelu", "embedding_bag"]
    assert fake.evaluated == ["embedding_bag"]  # only where the search gave no seed result
    assert fake.searched[0][1:] == (3, tmp_path / "search" / "gemm")
    rows = {p.name: p for p in report.problems}
    assert rows["gemm"].best_source == "search" and rows["gemm"].speedup == pytest.approx(2.5)
    assert rows["gemm"].best_roofline == pytest.approx(0.5)  # the seed's 0.2 times the gain
    assert rows["gelu"].best_source == "seed" and rows["gelu"].speedup == pytest.approx(1.0)  # slower: kept seed
    assert not rows["softmax"].correct and rows["softmax"].seed_status == "incorrect"
    assert rows["layer_norm"].correct and rows["layer_norm"].speedup is None
    assert rows["layer_norm"].roofline_fraction == pytest.approx(0.05)
    assert rows["embedding_bag"].search_state == "failed" and "search crashed" in rows["embedding_bag"].search_message
    assert rows["embedding_bag"].seed_status == "error" and "simulator crashed" in rows["embedding_bag"].seed_message
    s = report.summary
    assert s is not None
    assert (s.correct, s.pass_rate, s.fast_1) == (3, 0.6, 0.2)
    assert s.geomean_speedup == pytest.approx(math.sqrt(2.5))
    assert report.host["cores"] >= 1 and report.baseline == "seed"
    table = format_table(report)
    assert "INCORRECT" in table and "done (improved)" in table
    assert "pass rate        3/5 = 60.0%" in format_summary(report)


def test_runner_with_jobs_evaluates_in_parallel_in_suite_order(tmp_path: Path) -> None:
    fake = Scripted()
    config = BenchConfig(problems=PROBLEMS, budget=2, jobs=2, out_dir=tmp_path, progress=False, search=False)
    report = run_bench(config, evaluate_seed=fake.evaluate)
    assert [p.name for p in report.problems] == list(PROBLEMS)
    assert sorted(fake.evaluated) == sorted(PROBLEMS)
    assert all(p.search_state == "not run" for p in report.problems)
    assert any("search not run" in n for n in report.notes)


def test_runner_says_when_the_search_is_unavailable(tmp_path: Path, monkeypatch) -> None:
    fake = Scripted()
    monkeypatch.setattr(adapters, "search_unavailable", lambda: "kegen.search.run_search is not available (x)")
    report = run_bench(BenchConfig(problems=("gemm",), out_dir=tmp_path, progress=False),
                       evaluate_seed=fake.evaluate)
    assert report.notes == ["search not run: kegen.search.run_search is not available (x)"]
    assert report.problems[0].search_state == "not run"


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError, match="--jobs"):
        BenchConfig(jobs=0)
    with pytest.raises(ValueError, match="--budget"):
        BenchConfig(budget=-1)


def test_plot_is_written(tmp_path: Path) -> None:
    path = plot_report(_report([_row("a", True, 3.0), _row("b", False, None), _row("c", True, 0.8)]),
                       tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_writes_results_and_compares(tmp_path: Path, monkeypatch, capsys) -> None:
    fake = Scripted()
    monkeypatch.setattr(adapters, "evaluate_seed", fake.evaluate)
    out = tmp_path / "run1"
    rc = cli.main(["bench", "default", "--problems", "gemm,softmax", "--no-search", "--out", str(out),
                   "--no-progress"])
    assert rc == 0
    assert {f.name for f in out.iterdir()} >= {"results.json", "results.csv", "speedups.png"}
    text = capsys.readouterr().out
    assert "gemm" in text and "pass rate        1/2 = 50.0%" in text
    rc = cli.main(["bench", "default", "--problems", "gemm", "--no-search", "--out", str(tmp_path / "run2"),
                   "--no-progress", "--compare", str(out / "results.json")])
    assert rc == 0
    assert "dropped" in capsys.readouterr().out  # softmax is not in the second run


def test_cli_unknown_problem_is_a_usage_error(tmp_path: Path, capsys) -> None:
    rc = cli.main(["bench", "default", "--problems", "nope", "--out", str(tmp_path), "--no-progress"])
    assert rc == 2
    assert "no problem(s) nope" in capsys.readouterr().err


class _Node:
    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)


def test_search_result_is_read_from_the_store(tmp_path: Path) -> None:
    from kegen.search.store import GraphStore

    store = GraphStore(tmp_path / "s.db")
    run_id = store.create_run(problem_path="p.py", problem_key="k", target="mtia", machine="mtia-2i",
                              seed_hash=None, config={}, out_dir=str(tmp_path))
    root_id = store.add_node(run_id, parent_id=None, code="# seed\n", operator="seed")
    store.record_evaluation(root_id, status="ok", fitness=1.0, speedup=1.0, candidate_time_s=3.6e-6,
                            baseline_time_s=3.6e-6, roofline_fraction=0.2, duration_s=9.0)
    node_id = store.add_node(run_id, parent_id=root_id, code="# best kernel\n", operator="mutate", description="d")
    store.record_evaluation(node_id, status="ok", fitness=1.8, speedup=1.8, candidate_time_s=2e-6,
                            roofline_fraction=0.4)
    root, best = store.node(root_id), store.node(node_id)
    store.close()
    result = _Node(root=root, best=best, evaluations=4, elapsed_s=12.5, stop_reason="budget", db=tmp_path / "s.db",
                   run_id=run_id)
    outcome = adapters.search_outcome_from_result(result, tmp_path)
    assert (outcome.state, outcome.evaluations, outcome.gain) == ("done", 4, pytest.approx(1.8))
    assert outcome.found_correct
    assert outcome.best_time_s == pytest.approx(2e-6) and outcome.best_roofline == pytest.approx(0.4)
    assert Path(outcome.best_path).read_text() == "# best kernel\n"
    assert outcome.seed is not None
    assert (outcome.seed.status, outcome.seed.speedup, outcome.seed.roofline) == ("ok", 1.0, 0.2)
    assert outcome.seed.wall_s == 9.0


def test_search_result_without_a_correct_node(tmp_path: Path) -> None:
    from kegen.search.store import GraphStore

    store = GraphStore(tmp_path / "s.db")
    run_id = store.create_run(problem_path="p.py", problem_key="k", target="mtia", machine="mtia-2i",
                              seed_hash=None, config={}, out_dir=str(tmp_path))
    root_id = store.add_node(run_id, parent_id=None, code="# seed\n", operator="seed")
    store.record_evaluation(root_id, status="compile_error", message="op tt.foo is not supported")
    root = store.node(root_id)
    store.close()
    result = _Node(root=root, best=root, evaluations=2, elapsed_s=1.0, stop_reason="budget", db=tmp_path / "s.db",
                   run_id=run_id)
    outcome = adapters.search_outcome_from_result(result, tmp_path)
    assert not outcome.found_correct and outcome.gain is None
    assert outcome.seed is not None and outcome.seed.status == "compile_error"
    assert "tt.foo" in outcome.seed.message and "no correct kernel" in outcome.message


def test_seed_eval_reads_eval_results() -> None:
    from kegen.eval import EvalResult, Status

    r = EvalResult(status=Status.OK, candidate_time_s=4e-6, roofline_time_s=1e-6, speedups={"roofline": 0.25},
                   speedup=0.25, wall_time_s=2.0)
    s = adapters.seed_eval_from_result(r)
    assert (s.status, s.baseline, s.speedup, s.roofline) == ("ok", "seed", 1.0, 0.25)
    r = EvalResult(status=Status.OK, candidate_time_s=4e-6, speedups={"eager": 3.0}, speedup=3.0)
    assert adapters.seed_eval_from_result(r).speedup == 3.0
    r = EvalResult(status=Status.INCORRECT, message="max abs error 2")
    s = adapters.seed_eval_from_result(r)
    assert s.speedup is None and s.message == "max abs error 2"


def test_record_bench_writes_dated_files_and_a_history_line(tmp_path: Path, monkeypatch) -> None:
    from tests.tool_module import load_tool

    record = load_tool("record_bench")
    fake = Scripted()
    monkeypatch.setattr(adapters, "evaluate_seed", fake.evaluate)
    monkeypatch.setattr(record, "REPO", tmp_path)
    args = ["--problems", "gemm,softmax", "--no-search", "--results-dir", str(tmp_path / "res"), "--note", "t"]
    assert record.main(args) == 0
    assert record.main(args) == 0
    files = sorted(f.name for f in (tmp_path / "res").iterdir())
    day = next(f for f in files if f.startswith("bench_"))[len("bench_"):len("bench_") + 10]
    assert f"bench_{day}.json" in files and f"bench_{day}_2.json" in files and f"bench_{day}.png" in files
    lines = (tmp_path / "res" / "BENCH_HISTORY.md").read_text().splitlines()
    rows = [ln for ln in lines if ln.startswith(f"| {day}")]
    assert len(rows) == 2
    assert "1/2 (50%)" in rows[0] and "cores" in rows[0] and "| t |" in rows[0].replace("search not run: disabled (--no-search); ", "")


def test_time_limit_leaves_out_unstarted_problems_and_keeps_partial_results(tmp_path: Path) -> None:
    fake = Scripted()
    config = BenchConfig(problems=("gemm", "gelu", "softmax"), budget=2, out_dir=tmp_path, progress=False,
                         time_limit_s=0.0)
    report = run_bench(config, evaluate_seed=fake.evaluate, search_problem=fake.search)
    assert [p.name for p in report.problems] == ["gemm"]  # the first problem always starts
    assert report.notes == ["time limit 0 s reached; not run: softmax, gelu"]  # suite order
    partial = load_json(tmp_path / "partial.json")
    assert [p.name for p in partial.problems] == ["gemm"]


@pytest.mark.slow
def test_a_real_seed_on_the_simulator(tmp_path: Path) -> None:
    """End to end through kegen.eval on the simulated MTIA (one small problem, no search; ~10 s)."""
    from kegen.eval.timing_mtia import backend_status

    reason = backend_status()
    if reason:
        pytest.skip(f"mtia backend unavailable: {reason}")
    report = run_bench(BenchConfig(problems=("transpose",), search=False, out_dir=tmp_path, progress=False))
    [row] = report.problems
    assert row.seed_status == "ok", row.seed_message
    assert row.seed_speedup == 1.0 and report.baseline == "seed"
    assert row.seed_time_s and row.roofline_time_s and 0 < row.seed_roofline <= 1.0
    assert row.seed_roofline == pytest.approx(row.roofline_time_s / row.seed_time_s)
