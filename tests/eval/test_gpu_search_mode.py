"""The search's GPU evaluation mode on a real NVIDIA GPU (skipped without one): baselines and the
roofline from the evaluator's memo, ncu only for improving candidates, the kernel table always;
suite problems written for host tensors (the mtia convention) evaluated on the GPU."""

from __future__ import annotations

from typing import Any

import pytest
from eval_helpers import candidate, problem

from kegen.eval import EvalConfig, Status, evaluate
from kegen.eval.trusted import memo


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available() and getattr(torch.version, "hip", None) is None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU (torch.cuda)")]


@pytest.fixture(autouse=True)
def _clean_memo() -> Any:
    memo.clear()
    yield
    memo.clear()


def test_second_evaluation_reuses_baselines_and_skips_ncu() -> None:
    cfg = EvalConfig(target="nvidia", timeout_s=300)
    first = evaluate(problem("vector_add_gpu"), candidate("vector_add_ok"), config=cfg)
    second = evaluate(problem("vector_add_gpu"), candidate("vector_add_ok"), config=cfg)
    assert first.status is Status.OK and second.status is Status.OK, (first.message, second.message)
    assert {"eager/compile", "roofline"} <= set(second.details["memo"])
    assert second.times["eager"] == first.times["eager"]
    assert str(second.details["ncu"]).startswith("ncu skipped")
    assert any(k["name"] == "add_kernel" for k in second.profile["kernels"])
    assert "torch.profiler" in second.profile["sources"] and "ncu" not in second.profile["sources"]
    assert second.wall_time_s < first.wall_time_s


def test_timing_mode_has_no_kernel_profile() -> None:
    cfg = EvalConfig(target="nvidia", timeout_s=300, gpu_profile="timing")
    r = evaluate(problem("vector_add_gpu"), candidate("vector_add_ok"), config=cfg)
    assert r.status is Status.OK and not r.profile["kernels"] and "ncu" not in r.profile["sources"]


@pytest.mark.parametrize("name", ["softmax_fp32", "jagged_sum_fp32", "gemm_fp16_512"])
def test_suite_problems_written_for_host_tensors_run_on_the_gpu(name: str, monkeypatch: Any) -> None:
    from kegen.suites import find_suite

    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.125")
    (p,) = find_suite("production").select([name]).problems
    r = evaluate(p.problem_path, p.seed_path, config=EvalConfig(target="nvidia", timeout_s=300))
    assert r.status is Status.OK, r.message
    assert r.times["candidate"] > 0 and "eager" in r.times
