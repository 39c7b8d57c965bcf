"""Screening before simulation (kegen.search.screening): the driver's bookkeeping, the task's
decisions and the static lower bound's arithmetic; no simulator, no sandbox (see
test_screening_sim.py for those)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kegen.eval.request import EvalRequest
from kegen.executor import FileRef, InlineExecutor
from kegen.search import screening_probe
from kegen.search.screening import (
    Screening,
    ScreeningConfig,
    ScreenRequest,
    evals_to_fraction,
    lower_bound,
    screened_task,
)
from kegen.search.screening_probe import LaunchSummary, ProbeResult
from kegen.search.store import GraphStore
from tests.search.search_helpers import new_run

ROOF = {"compute_time_s": 100e-6, "memory_time_s": 20e-6, "flops": 1.0, "bytes": 1.0}


def _launch(programs: int, sram: str = "cache") -> LaunchSummary:
    return LaunchSummary("k", (programs, 1, 1), sram, False, "e" * 64)


def test_lower_bound_counts_launches_pes_and_the_sram_level() -> None:
    full = lower_bound([_launch(64)], ROOF, "mtia-2i", 0.9)
    assert full.pes_used == 64 and full.num_pes == 64
    assert full.seconds == pytest.approx(0.8e-6 + 0.9 * 100e-6)
    quarter = lower_bound([_launch(16)], ROOF, "mtia-2i", 0.9)
    assert quarter.compute_s == pytest.approx(4 * 100e-6)  # 16 programs use at most 16 PEs
    two = lower_bound([_launch(64), _launch(8)], ROOF, "mtia-2i", 0.9)
    assert two.launch_s == pytest.approx(1.6e-6) and two.pes_used == 64  # the widest launch counts
    mem = {"compute_time_s": 0.0, "memory_time_s": 20e-6}
    resident = lower_bound([_launch(64, "resident")], mem, "mtia-2i", 1.0)
    cache = lower_bound([_launch(64, "cache")], mem, "mtia-2i", 1.0)
    assert resident.memory_s < cache.memory_s == pytest.approx(20e-6)  # SRAM may serve resident tensors


# ---- the task (the probe replaced by a stand-in) -------------------------------------------------


def _args(code: str = "code") -> tuple[Any, ...]:
    problem = FileRef("problem.py", "class Model: pass\n")
    return (_evaluate, EvalRequest(problem, code, None, target="mtia", machine="mtia-2i"))


def _evaluate(*args: Any) -> dict[str, Any]:
    return {"status": "ok", "fitness": 2.0, "candidate_time_s": 50e-6, "metrics": {}}


def _with_probe(monkeypatch: pytest.MonkeyPatch, result: ProbeResult) -> None:
    monkeypatch.setattr(screening_probe, "probe", lambda *a, **k: result)


def _request(known: frozenset[str] = frozenset(), best: float | None = None) -> ScreenRequest:
    return ScreenRequest(ScreeningConfig(), known, best, b"salt")


def test_compile_errors_are_rejected_with_the_lowerings_message(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = "LocalStoreOverflowError: the kernel's blocks do not fit in the local store"
    _with_probe(monkeypatch, ProbeResult("compile_error", msg, source_line="candidate.py:21"))
    out = screened_task(_request(), _fail_if_called, *_args())
    assert out["status"] == "compile_error" and out["message"] == msg
    assert out["metrics"]["screen"] == "rejected" and out["metrics"]["source_line"] == "candidate.py:21"


def _fail_if_called(*args: Any) -> dict[str, Any]:
    raise AssertionError("screened candidates must not be evaluated")


def test_known_keys_are_duplicates_and_hopeless_plans_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_probe(monkeypatch, ProbeResult("ok", key="K1", launches=[_launch(16)], roofline=ROOF))
    dup = screened_task(_request(frozenset({"K1"})), _fail_if_called, *_args())
    assert dup["metrics"]["screen"] == "duplicate" and dup["metrics"]["artifact_key"] == "K1"
    # bound: 0.8 us + 0.9 * 400 us (16 of 64 PEs) = 360.8 us
    hopeless = screened_task(_request(best=300e-6), _fail_if_called, *_args())
    assert hopeless["status"] == "skipped" and hopeless["metrics"]["screen"] == "hopeless"
    assert "lower bound 360.80 us" in hopeless["message"] and "16/64 PEs" in hopeless["message"]
    assert hopeless["metrics"]["lower_bound"]["compute_s"] == pytest.approx(400e-6)


def test_a_candidate_whose_bound_is_below_the_best_is_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_probe(monkeypatch, ProbeResult("ok", key="K2", launches=[_launch(64)], roofline=ROOF))
    out = screened_task(_request(best=95e-6), _evaluate, *_args())  # bound 90.8 us < best
    assert out["status"] == "ok" and out["metrics"]["screen"] == "simulated"
    assert out["metrics"]["artifact_key"] == "K2" and "lower_bound" in out["metrics"]


def test_a_failed_probe_never_fails_the_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_probe(monkeypatch, ProbeResult("failed", "runtime_error: boom"))
    out = screened_task(_request(best=1e-9), _evaluate, *_args())
    assert out["status"] == "ok" and out["metrics"]["screen"] == "probe_failed"


# ---- the driver's side ---------------------------------------------------------------------------


class FakeTask:
    """Stands in for `screened_task`: the key is the code's first word; records the requests."""

    def __init__(self) -> None:
        self.requests: list[ScreenRequest] = []

    def __call__(self, request: ScreenRequest, fn: Any, *args: Any) -> dict[str, Any]:
        self.requests.append(request)
        code = args[1].code  # (evaluator, EvalRequest)
        key = code.split()[0]
        if code.endswith("overflow"):
            return {"status": "compile_error", "message": "overflow", "metrics": {"screen": "rejected"}}
        if key in request.known_keys:
            return {"status": "skipped", "metrics": {"screen": "duplicate", "artifact_key": key}}
        out = fn(*args)
        out["metrics"] = {"screen": "simulated", "artifact_key": key}
        return out


def _screening(budget: int = 10) -> tuple[Screening, FakeTask]:
    s = Screening(
        ScreeningConfig(), target="mtia", evaluator="kegen.search.fitness:evaluate_candidate", budget=budget
    )
    task = FakeTask()
    s.task = task
    return s, task


def test_duplicates_get_the_evaluated_nodes_result_and_cost_no_budget() -> None:
    s, task = _screening()
    assert s.active
    ex = InlineExecutor()
    first = s.submit(ex, 1, _evaluate, *_args("A x")).result()
    assert first["status"] == "ok" and s.best_time_s == 50e-6
    dup = s.submit(ex, 2, _fail_if_called, *_args("A y")).result()
    assert task.requests[-1].known_keys == frozenset({"A"}) and task.requests[-1].best_time_s == 50e-6
    assert dup["status"] == "ok" and dup["fitness"] == 2.0 and dup["metrics"]["duplicate_of"] == 1
    assert "node 1" in dup["message"]
    assert not Screening.charged(_Outcome(dup["metrics"]))
    assert Screening.charged(_Outcome(first["metrics"]))
    s.submit(ex, 3, _fail_if_called, *_args("B overflow")).result()
    assert s.counts.to_dict() | {"probe_s": 0} == {
        "simulated": 1,
        "duplicates": 1,
        "rejected": 1,
        "hopeless": 0,
        "probe_failed": 0,
        "probe_s": 0,
    }


class _Outcome:
    def __init__(self, metrics: dict[str, Any]) -> None:
        self.metrics = metrics


def test_screened_candidates_are_charged_beyond_the_cap() -> None:
    s, _ = _screening(budget=0)  # cap: 8 free screened candidates
    ex = InlineExecutor()
    outs = [s.submit(ex, i, _fail_if_called, *_args(f"C{i} overflow")).result() for i in range(10)]
    charged = [Screening.charged(_Outcome(o["metrics"])) for o in outs]
    assert charged == [False] * 8 + [True] * 2


def test_inactive_screening_submits_the_task_itself() -> None:
    s = Screening(
        ScreeningConfig(), target="cpu", evaluator="kegen.search.fitness:evaluate_candidate", budget=4
    )
    assert not s.active
    out = s.submit(InlineExecutor(), 1, _evaluate, *_args()).result()
    assert out["status"] == "ok" and s.counts.simulated == 1


# ---- evaluations to 90% and the search summary ---------------------------------------------------


def test_evals_to_fraction_counts_simulated_children_only(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "s.db")
    run = new_run(store)
    root = store.add_node(run, parent_id=None, code="r", operator="seed", description="", target="mtia")
    store.record_evaluation(root, status="ok", fitness=1.0)
    plan = [(1.2, "simulated"), (3.0, "duplicate"), (1.1, "hopeless"), (2.8, "simulated"), (3.0, "simulated")]
    for i, (fit, screen) in enumerate(plan):
        n = store.add_node(run, parent_id=root, code=f"c{i}", operator="o", description="", target="mtia")
        ok = screen != "hopeless"
        metrics: dict[str, Any] = {"screen": screen}
        if screen == "duplicate":
            metrics["duplicate_of"] = root
        store.record_evaluation(
            n, status="ok" if ok else "skipped", fitness=fit if ok else 0.0, metrics=metrics
        )
    # best 3.0; 90% = 2.7: the duplicate reaches it after 1 simulated child (it was free)
    assert evals_to_fraction(store, run, 0.9) == 1
    assert evals_to_fraction(store, run, 1.0) == 1
    empty = new_run(store)
    assert evals_to_fraction(store, empty, 0.9) is None


def test_the_search_summary_reports_screening(tmp_path: Path) -> None:
    from kegen.search.config import EvalSliceConfig, SearchConfig, StoreConfig, TerminationConfig
    from kegen.search.loop import SearchDriver

    example = Path(__file__).parents[2] / "kegen" / "examples" / "softmax"
    config = SearchConfig(
        problem=example / "problem.py",
        seed=example / "seed.py",
        out_dir=tmp_path / "out",
        termination=TerminationConfig(max_evaluations=3),
        eval=EvalSliceConfig(jobs=0, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "s.db", warm_start=False),
        progress=False,
    )
    result = SearchDriver(config).run()
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    assert summary["screening"]["simulated"] == result.evaluations + 1  # the seed too
    assert summary["screening"] == result.screening["screening"]
    assert summary["evals_to_90"] == result.screening["evals_to_90"]
    assert isinstance(summary["evals_to_90"], int) and 0 <= summary["evals_to_90"] <= result.evaluations


def test_kegen_evolve_prints_the_screening_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kegen.cli import main
    from tests.search.search_helpers import fake_evolve_argv

    argv = fake_evolve_argv("vector_add", tmp_path / "db.sqlite", tmp_path / "run", 2, "--no-warm-start")
    assert main(argv) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("screening:"))
    assert "3 simulated, 0 duplicates" in line and "evaluations to 90% of the best:" in line
