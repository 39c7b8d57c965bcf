"""The evaluator's memo of problem-level measurements (baselines, roofline) across the evaluations
of one process: reused under the same key, measured again when anything in the key changes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from eval_helpers import candidate, needs_mtia, problem, quick

from kegen.eval import EvalConfig, evaluate
from kegen.eval.trusted import memo


@pytest.fixture(autouse=True)
def _clean_memo() -> Any:
    memo.clear()
    yield
    memo.clear()


class _Ev:
    def __init__(self, sha: str, cfg: dict[str, Any]) -> None:
        self.cfg = EvalConfig(**cfg)
        self.result: dict[str, Any] = {"details": {"problem_sha256": sha}}


def Ev(sha: str = "abc", **cfg: Any) -> Any:  # noqa: N802 - reads as the evaluator it stands for
    """What the memo's key reads of an Evaluator."""
    return _Ev(sha, cfg)


def test_key_covers_problem_inputs_target_machine_and_timing_knobs() -> None:
    import torch

    init = [torch.zeros(4, 8), 3]
    base = memo.problem_key(Ev(), "reference", init)
    assert base == memo.problem_key(Ev(), "reference", [torch.ones(4, 8), 3])  # values do not matter
    for other in (
        memo.problem_key(Ev(sha="other"), "reference", init),
        memo.problem_key(Ev(), "reference", [torch.zeros(4, 9), 3]),
        memo.problem_key(Ev(), "reference", [torch.zeros(4, 8, dtype=torch.float16), 3]),
        memo.problem_key(Ev(), "reference", [torch.zeros(4, 8), 4]),
        memo.problem_key(Ev(machine="mtia-v1"), "reference", init),
        memo.problem_key(Ev(target="cpu"), "reference", init),
        memo.problem_key(Ev(timing_runs=5), "reference", init),
        memo.problem_key(Ev(), "roofline", init),
        memo.problem_key(Ev(), "reference", init, source="seed2"),
        memo.problem_key(Ev(), "reference", init, SimpleNamespace(M=256, _SCALE=0.125)),
    ):
        assert other != base
    small = memo.problem_key(Ev(), "reference", init, SimpleNamespace(M=256, _SCALE=0.125, fn=len))
    assert small == memo.problem_key(Ev(), "reference", init, SimpleNamespace(M=256, _SCALE=0.125))
    assert small != memo.problem_key(Ev(), "reference", init, SimpleNamespace(M=2048, _SCALE=1.0))


def test_memo_is_bounded_and_best_time_only_improves() -> None:
    for i in range(memo.MAX_ENTRIES + 10):
        memo.put(str(i), i)
    assert memo.get("0") is None and memo.get(str(memo.MAX_ENTRIES + 9)) == memo.MAX_ENTRIES + 9
    memo.record_time("k", 2.0)
    memo.record_time("k", 3.0)
    memo.record_time("k", -1.0)
    assert memo.best_time("k") == 2.0


def test_baselines_are_measured_once_per_problem(tmp_path: Path) -> None:
    cfg = quick("cpu")
    seed = candidate("vector_add_ok")
    first = evaluate(problem("vector_add"), candidate("vector_add_ok"), baseline=seed, config=cfg)
    second = evaluate(problem("vector_add"), candidate("vector_add_ok"), baseline=seed, config=cfg)
    assert first.ok and second.ok, (first.message, second.message)
    assert "memo" not in first.details
    assert first.details["baseline_is_candidate"]  # a search's root: its own time, no second worker
    assert first.times["baseline"] == first.times["candidate"] and first.speedup == 1.0
    assert set(second.details["memo"]) == {"baseline", "eager/compile"}
    assert second.times["eager"] == first.times["eager"]
    assert second.times["baseline"] == first.times["baseline"]
    assert second.times["candidate"] != first.times["candidate"]  # the candidate is always measured
    edited = tmp_path / "vector_add.py"
    edited.write_text(problem("vector_add").read_text() + "\n# edited\n")
    third = evaluate(edited, candidate("vector_add_ok"), baseline=seed, config=cfg)
    assert third.ok and "memo" not in third.details  # another problem text: measured again


def test_another_baseline_source_is_measured_in_its_own_worker() -> None:
    cfg = quick("cpu")
    seed = candidate("vector_add_launcher")
    r = evaluate(problem("vector_add"), candidate("vector_add_ok"), baseline=seed, config=cfg)
    assert r.ok and "baseline_is_candidate" not in r.details
    assert r.times["baseline"] != r.times["candidate"]


def test_a_failing_baseline_is_not_kept() -> None:
    cfg = quick("cpu")
    for _ in range(2):
        r = evaluate(
            problem("vector_add"),
            candidate("vector_add_ok"),
            baseline=candidate("vector_add_wrong"),
            config=cfg,
        )
        assert r.ok and "baseline_error" in r.details
        assert "baseline" not in (r.details.get("memo") or [])


@needs_mtia()
@pytest.mark.slow
def test_mtia_reuses_the_seed_and_the_roofline() -> None:
    cfg = quick("mtia")
    seed = candidate("vector_add_ok")
    first = evaluate(problem("vector_add"), candidate("vector_add_ok"), baseline=seed, config=cfg)
    second = evaluate(problem("vector_add"), candidate("vector_add_ok"), baseline=seed, config=cfg)
    assert first.ok and second.ok
    assert set(second.details["memo"]) == {"baseline", "roofline"}
    assert second.roofline_time_s == first.roofline_time_s
    assert second.roofline_time_s and second.candidate_time_s
    assert second.speedups["roofline"] == pytest.approx(second.roofline_time_s / second.candidate_time_s)


def test_a_runs_timing_seed_fixes_the_timed_draws_and_keys_the_baselines(monkeypatch) -> None:
    """Off mtia too (docs/DECISIONS.md D49): the timed calls and eager/torch.compile use the run's
    draws, and a baseline measured for one run's draws is not reused by another run."""
    from kegen.eval.inputs import InputFactory

    seeds: list[int] = []
    real = InputFactory.make

    def spy(self, seed, sizes=None):  # noqa: ANN001, ANN202
        seeds.append(seed)
        return real(self, seed, sizes)

    monkeypatch.setattr(InputFactory, "make", spy)
    runs = {}
    for name, timing_seed in (("a", 1000), ("b", 2000), ("a again", 1000)):
        seeds.clear()
        r = evaluate(problem("vector_add"), candidate("vector_add_ok"),
                     config=quick("cpu", extra={"timing_seed": timing_seed}))
        assert r.ok, r.message
        runs[name] = (list(seeds), set(r.details.get("memo") or []))
    used, reused = runs["a"]
    assert used.count(1000) == 2 and used.count(1001) == 1  # eager's set, the warm-up and the timed call
    assert "eager/compile" not in runs["b"][1]  # another run's draws: measured again
    assert 2000 in runs["b"][0] and 1000 not in runs["b"][0]
    assert "eager/compile" in runs["a again"][1]
