"""Screening against the real lowering and simulator: the static bound is below every simulated
time (so a correct, faster candidate is never skipped), the artifact key finds candidates that
lower to the same work, and a local-store overflow is rejected with the lowering's message."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from kegen.eval.request import EvalRequest
from kegen.executor import FileRef
from kegen.search.fitness import evaluate_candidate, evaluate_task
from kegen.search.screening import ScreeningConfig, ScreenRequest, lower_bound, screened_task
from kegen.search.screening_probe import LaunchSummary, probe

pytest.importorskip("mtia_sim.simulator")

SUITE = Path(__file__).parents[2] / "kegen" / "suites" / "default" / "gemm"
PROBLEM = SUITE / "problem.py"
SEED = (SUITE / "seed.py").read_text()
TILE = "BM, BN, BK = 32, 32, 32"


def variant(tile: int, sram: str = "cache", block_k: int = 32) -> str:
    src = SEED.replace(TILE, f"BM, BN, BK = {tile}, {tile}, {block_k}")
    return src.replace("BLOCK_K=BK)", f"BLOCK_K=BK, sram_mode={sram!r})")


def _roofline() -> dict[str, float]:
    from kegen.eval.loader import load_problem
    from kegen.eval.trusted import roofline

    problem = load_problem(PROBLEM)
    model = problem.model_cls()
    inputs = problem.get_inputs()
    rf = roofline.problem_roofline(model, inputs, model(*inputs), roofline.mtia_peak("mtia-2i"))
    return {"compute_time_s": rf.compute_time_s, "memory_time_s": rf.memory_time_s}


def _run_in_process(src: str, tmp_path: Path, name: str) -> tuple[float, list[LaunchSummary]]:
    from lowering.backend import driver

    path = tmp_path / f"{name}.py"  # Triton reads a jit function's source from its file
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    driver.clear_launch_history()
    mod.ModelNew()(a, b)
    history = driver.launch_history()
    sram = "resident" if "resident" in src else "cache"
    launches = [LaunchSummary(h.kernel, h.grid, sram, False, "") for h in history]
    return sum(float(h.result.seconds) for h in history), launches


@pytest.mark.parametrize(
    ("tile", "sram"), [(32, "cache"), (128, "cache"), (64, "resident"), (128, "resident")]
)
def test_the_static_bound_is_below_the_simulated_time(tile: int, sram: str, tmp_path: Path) -> None:
    seconds, launches = _run_in_process(variant(tile, sram), tmp_path, f"gemm_{tile}_{sram}")
    bound = lower_bound(launches, _roofline(), "mtia-2i", 1.0)  # even without the evaluator's slack
    assert bound.pes_used == min(64, (256 // tile) ** 2)
    assert 0 < bound.seconds <= seconds, (bound, seconds)


def _screen(code: str, known: frozenset[str], best: float | None, salt: bytes = b"t") -> dict[str, Any]:
    request = EvalRequest(
        FileRef(str(PROBLEM), PROBLEM.read_text()),
        code,
        FileRef(str(SUITE / "seed.py"), SEED),
        target="mtia",
        machine="mtia-2i",
    )
    args = (evaluate_candidate, request)
    return screened_task(ScreenRequest(ScreeningConfig(), known, best, salt), evaluate_task, *args)


@pytest.mark.slow
def test_probe_keys_the_compiled_work_and_rejects_overflows() -> None:
    base = probe(PROBLEM, SEED, "mtia-2i", salt=b"s")
    assert base.status == "ok" and base.key and base.launches[0].programs == 64
    same = [
        SEED.replace("BLOCK_K=BK)", "BLOCK_K=BK, num_warps=8)"),  # ignored by the mtia backend
        SEED.replace("acc += tl.dot(a, b)", "acc += tl.dot(a, b)  # a comment"),
    ]
    for code in same:
        assert probe(PROBLEM, code, "mtia-2i", salt=b"s").key == base.key
    other = [
        variant(64),  # other kernels
        SEED.replace("return c", "return c.t().contiguous().t()"),  # same launches, other outputs
    ]
    for code in other:
        assert probe(PROBLEM, code, "mtia-2i", salt=b"s").key not in (None, base.key)
    over = probe(PROBLEM, variant(256, block_k=256), "mtia-2i", salt=b"s")
    assert over.status == "compile_error" and "local store" in over.message


@pytest.mark.slow
def test_a_correct_faster_candidate_is_simulated_and_a_hopeless_one_skipped(tmp_path: Path) -> None:
    fast = variant(64, "resident")
    seconds, _ = _run_in_process(fast, tmp_path, "gemm_fast")
    out = _screen(fast, frozenset(), best=seconds * 1.02)  # it beats the best by 2%
    assert out["metrics"]["screen"] == "simulated" and out["status"] == "ok", out
    assert out["candidate_time_s"] == pytest.approx(seconds, rel=1e-6)
    assert out["metrics"]["lower_bound"]["seconds"] <= out["candidate_time_s"]
    bound = out["metrics"]["lower_bound"]["seconds"]
    skipped = _screen(variant(128), frozenset(), best=bound / 4)
    assert skipped["status"] == "skipped" and skipped["metrics"]["screen"] == "hopeless"
