"""GPU evaluation (nvidia): skipped cleanly on machines without a GPU (CI)."""

from __future__ import annotations

import pytest
from eval_helpers import run_eval

from kegen.eval import EvalConfig, Status


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available() and getattr(torch.version, "hip", None) is None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU (torch.cuda)")]


def test_nvidia_eval_times_candidate_eager_and_roofline() -> None:
    r = run_eval("vector_add_gpu", "vector_add_ok", EvalConfig(target="nvidia", timeout_s=300))
    assert r.status is Status.OK, r.message
    assert {"candidate", "eager", "roofline"} <= set(r.times)
    assert r.speedup == pytest.approx(r.times["eager"] / r.times["candidate"])
    assert r.candidate_time_s >= 0.9 * r.roofline_time_s
    assert any(k["name"] == "add_kernel" for k in r.profile["kernels"])


def test_side_stream_work_is_a_cheat_on_gpu() -> None:
    r = run_eval("vector_add_gpu", "cheat_side_stream", EvalConfig(target="nvidia", timeout_s=300))
    assert r.status is Status.CHEAT_DETECTED, (r.status, r.message)


def test_library_op_is_a_cheat_on_gpu() -> None:
    r = run_eval("vector_add_gpu", "cheat_library_op", EvalConfig(target="nvidia", timeout_s=300))
    assert r.status is Status.CHEAT_DETECTED and "aten.add" in r.message


def test_nvidia_eval_on_a_runs_timing_draws_keys_its_baselines_by_them() -> None:
    """D49 on a GPU: candidate, baseline and eager timed on the run's draws; another run re-measures."""
    from eval_helpers import candidate

    from kegen.eval.trusted import memo

    memo.clear()
    seed = candidate("vector_add_launcher")
    found = []
    for timing_seed in (11, 11, 12):
        cfg = EvalConfig(target="nvidia", timeout_s=300, extra={"timing_seed": timing_seed})
        r = run_eval("vector_add_gpu", "vector_add_ok", cfg, baseline=seed)
        assert r.status == Status.OK, r.message
        assert r.times.get("baseline") and r.times.get("eager") and r.times.get("candidate")
        found.append(set(r.details.get("memo") or []))
    assert {"baseline", "eager/compile"} <= found[1]  # the same run: reused
    assert not found[2] & {"baseline", "eager/compile"}  # another run's draws: measured again
    memo.clear()
