"""kegen bench against torch.compile on mtia: per-problem compile time and speedup over the compiler."""

from __future__ import annotations

import pytest

from kegen.bench.compile_baseline import add_compile_baselines
from kegen.bench.metrics import summarize
from kegen.bench.results import ProblemResult
from kegen.bench.table import format_table
from kegen.suites import find_suite
from lowering.backend.driver import MtiaDriver


def _row(name: str, best: float | None, compile_s: float | None, host: str = "") -> ProblemResult:
    return ProblemResult(name=name, seed_status="ok", seed_correct=best is not None, seed_speedup=1.0,
                         best_speedup=1.0, best_time_s=best, compile_time_s=compile_s, compile_host_ops=host)  # fmt: skip


def test_speedup_over_compile_needs_a_correct_kernel_and_a_complete_compile_time() -> None:
    rows = [
        _row("a", 1e-6, 2e-6),
        _row("b", 4e-6, 2e-6),
        _row("c", 1e-6, 2e-6, host="aten.linalg_inv_ex"),
        _row("d", None, 2e-6),
    ]
    assert [r.speedup_vs_compile for r in rows] == [2.0, 0.5, None, None]
    s = summarize(rows)
    assert s.compile_compared == 2 and s.fast_1_vs_compile == 0.5
    assert s.geomean_speedup_vs_compile == pytest.approx(1.0)
    assert "vs compile" in format_table(type("R", (), {"problems": rows})())  # type: ignore[arg-type]


@pytest.mark.skipif(not MtiaDriver.is_active(), reason="the mtia driver is off on a machine with a GPU")
def test_compile_baseline_of_a_suite_problem_is_measured_in_its_own_process() -> None:
    suite = find_suite("default").select(["softmax"])
    rows = [ProblemResult(name="softmax", seed_status="ok", seed_correct=True, best_time_s=1e-6)]
    add_compile_baselines(rows, list(suite.problems), "mtia-2i")
    assert rows[0].compile_message == "" and rows[0].compile_time_s and rows[0].compile_time_s > 0
    assert rows[0].compile_host_ops == "" and rows[0].speedup_vs_compile is not None
