"""tools/record_production_gpu.py without a GPU: resumable phases, the deadline, the summary's
ratios (the evaluations themselves are faked; the real ones run on the GPU machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tool_module import load_tool


@pytest.fixture(scope="module")
def tool() -> Any:
    return load_tool("record_production_gpu")


SEED = {"status": "ok", "seed_s": 40e-6, "eager_s": 60e-6, "compile_s": 50e-6, "roofline_s": 20e-6,
        "first_eval_wall_s": 30.0, "warm_eval_wall_s": [6.0]}  # fmt: skip
SEARCH = {"budget": 4, "evaluations": 4, "best_s": 25e-6, "evals_to_90pct_of_best": 3,
          "eval_wall_s": [9.0, 5.0, 7.0, 8.0]}  # fmt: skip


def test_summary_row_ratios(tool: Any) -> None:
    row = tool.summarize("gemm", {"seed": SEED, "search": SEARCH})
    assert row["seed_over_compile"] == pytest.approx(50 / 40)
    assert row["best_over_seed"] == pytest.approx(40 / 25)
    assert row["best_over_compile"] == pytest.approx(2.0)
    assert row["best_over_eager"] == pytest.approx(60 / 25)
    assert row["best_roofline_fraction"] == pytest.approx(0.8)
    assert row["eval_wall_median_s"] == pytest.approx(6.5)  # warm seed 6 + candidates after the first 5, 7, 8
    no_search = tool.summarize("gemm", {"seed": SEED})
    assert no_search["best_s"] == SEED["seed_s"] and no_search["best_over_seed"] is None
    broken = tool.summarize("x", {"seed": {"status": "incorrect", "message": "wrong", "seed_s": None}})
    assert broken["best_s"] is None and broken["message"] == "wrong"


def test_geomean_skips_missing_values(tool: Any) -> None:
    assert tool.geomean([2.0, None, 8.0]) == pytest.approx(4.0)
    assert tool.geomean([None]) is None


def test_resumable_phases_deadline_and_summary(
    tool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []

    def seed_phase(p: Any, args: Any) -> dict[str, Any]:
        calls.append((p.name, "seed"))
        return dict(SEED)

    def search_phase(p: Any, args: Any) -> dict[str, Any]:
        calls.append((p.name, "search"))
        return {**SEARCH, "budget": args.budget}

    monkeypatch.setattr(tool, "seed_phase", seed_phase)
    monkeypatch.setattr(tool, "search_phase", search_phase)
    base = ["--only", "gemm_fp16_512,softmax_fp32", "--out", str(tmp_path), "--budget", "4", "--skip-done"]
    assert tool.main(base + ["--deadline", "0"]) == 0
    assert calls == [("gemm_fp16_512", "seed")]  # the deadline stops before the next phase starts
    assert tool.main(base) == 0
    # every seed first (a deadline leaves baselines for all problems), then the searches
    assert calls[1:] == [("softmax_fp32", "seed"), ("gemm_fp16_512", "search"), ("softmax_fp32", "search")]
    n = len(calls)
    assert tool.main(base) == 0 and len(calls) == n  # everything done
    assert tool.main([*base[:-2], "8", "--skip-done"]) == 0  # a bigger budget re-runs the searches
    assert [c for c in calls[n:] if c[1] == "seed"] == [] and len(calls[n:]) == 2
    data = json.loads((tmp_path / "production_nvidia.json").read_text())
    assert [r["problem"] for r in data["rows"]] == ["gemm_fp16_512", "softmax_fp32"]  # the suite's order
    assert data["totals"]["geomean_best_over_compile"] == pytest.approx(2.0)
    md = (tmp_path / "production_nvidia.md").read_text()
    assert "| gemm_fp16_512 | ok | 60.0 | 50.0 | 40.0 | 25.0 | 1.25x | 1.60x | 2.00x | 80% |" in md
    assert (tmp_path / "production_nvidia" / "softmax_fp32.json").is_file()
    (tmp_path / "production_nvidia.md").unlink()
    n = len(calls)
    assert tool.main(["--out", str(tmp_path), "--summary-only"]) == 0 and len(calls) == n
    assert "| softmax_fp32 | ok |" in (tmp_path / "production_nvidia.md").read_text()
    rec = json.loads((tmp_path / "production_nvidia" / "softmax_fp32.json").read_text())
    rec["environment"] = {"device": "NVIDIA H200", "recorded_utc": "2999-01-01 00:00:00"}
    (tmp_path / "production_nvidia" / "softmax_fp32.json").write_text(json.dumps(rec))
    assert tool.main(["--out", str(tmp_path), "--summary-only"]) == 0
    assert "on NVIDIA H200" in (tmp_path / "production_nvidia.md").read_text()  # not this machine


def test_a_failing_phase_is_recorded_and_the_run_goes_on(
    tool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def seed_phase(p: Any, args: Any) -> dict[str, Any]:
        raise RuntimeError("no GPU")

    monkeypatch.setattr(tool, "seed_phase", seed_phase)
    assert tool.main(["--only", "gemm_fp16_512,softmax_fp32", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "production_nvidia" / "softmax_fp32.json").read_text())
    assert rec["seed"] == {"status": "error", "message": "RuntimeError: no GPU"} and "search" not in rec
    calls: list[str] = []
    monkeypatch.setattr(tool, "seed_phase", lambda p, a: calls.append(p.name) or dict(SEED))
    monkeypatch.setattr(tool, "search_phase", lambda p, a: dict(SEARCH))
    assert tool.main(["--only", "softmax_fp32", "--out", str(tmp_path), "--skip-done"]) == 0
    assert calls == ["softmax_fp32"]  # a phase the tool failed on is not "done"


def test_problem_major_order_and_no_ncu_option(
    tool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(tool, "seed_phase", lambda p, a: calls.append((p.name, "seed")) or dict(SEED))
    monkeypatch.setattr(tool, "search_phase", lambda p, a: calls.append((p.name, "search")) or dict(SEARCH))
    args = ["--only", "gemm_fp16_512,softmax_fp32", "--out", str(tmp_path), "--order", "problems"]
    assert tool.main(args) == 0
    assert calls == [("gemm_fp16_512", "seed"), ("gemm_fp16_512", "search"), ("softmax_fp32", "seed"),
                     ("softmax_fp32", "search")]  # fmt: skip
    assert tool._ncu(tool.parse_args(["--ncu", "none"])) == {"ncu_if_faster_than": 0.0}
    assert tool._ncu(tool.parse_args([])) == {}
    from kegen.search.fitness import load_evaluator

    assert load_evaluator(f"{tool.MODULE}:evaluate_without_ncu") is tool.evaluate_without_ncu


def test_native_dtype_baselines_are_the_compile_baseline_when_faster(
    tool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    native = {"status": "ok", "upcast_eager_s": 60e-6, "native_eager_s": 30e-6, "native_compile_s": 20e-6}
    row = tool.summarize("gemm", {"seed": SEED, "search": SEARCH, "native": native})
    assert row["compile_s"] == pytest.approx(20e-6) and row["eager_s"] == pytest.approx(30e-6)
    assert row["best_over_compile"] == pytest.approx(20 / 25) and row["upcast_compile_s"] == 50e-6
    slower = {**native, "native_compile_s": 90e-6}  # the faster of the two is the baseline
    assert tool.summarize("gemm", {"seed": SEED, "native": slower})["compile_s"] == pytest.approx(50e-6)
    failed = {"status": "error", "message": "x"}
    assert tool.summarize("gemm", {"seed": SEED, "native": failed})["compile_s"] == pytest.approx(50e-6)

    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(tool, "seed_phase", lambda p, a: calls.append((p.name, "seed")) or dict(SEED))
    monkeypatch.setattr(tool, "native_phase", lambda p, a: calls.append((p.name, "native")) or dict(native))
    monkeypatch.setattr(tool, "search_phase", lambda p, a: calls.append((p.name, "search")) or dict(SEARCH))
    args = ["--only", "gemm_fp16_512,softmax_fp32", "--out", str(tmp_path), "--skip-done", "--budget", "4"]
    assert tool.main(args) == 0
    # gemm's reference upcasts (`.float()`): timed natively; softmax's is fp32 already: not
    assert [c for c in calls if c[1] == "native"] == [("gemm_fp16_512", "native")]
    n = len(calls)
    assert tool.main(args) == 0 and len(calls) == n  # recorded: not timed again
    assert tool.main([*args, "--target", "cpu"]) == 0
    assert not [c for c in calls[n:] if c[1] == "native"]  # GPU targets only
    md = (tmp_path / "production_nvidia.md").read_text()
    assert "native dtype for gemm_fp16_512" in md and "| gemm_fp16_512 | ok | 30.0 | 20.0 |" in md
