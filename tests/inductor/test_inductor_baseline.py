"""The compile baseline: torch.compile on mtia, simulated time, per-kernel records, host ops."""

from __future__ import annotations

import pytest
from inductor_helpers import write_problem

from kegen.inductor.baseline import compile_baseline


@pytest.mark.slow
def test_compile_baseline_times_every_kernel_and_names_host_ops(tmp_path) -> None:
    p = write_problem(
        tmp_path,
        "lin",
        "self.fc = nn.Linear(16, 8)",
        "return torch.sigmoid(self.fc(x))",
        "[torch.randn(4, 16)]",
    )
    b = compile_baseline(p, machine="mtia-2i")
    assert b.complete and b.seconds > 0 and b.max_abs_error < 1e-4
    assert b.seconds == sum(k.seconds for k in b.kernels)
    d = b.to_dict()
    assert d["kernels"][0]["kernel"] == "kegen_matmul_kernel" and "counters" not in d["kernels"][0]

    inv = write_problem(
        tmp_path, "inv", "", "return torch.linalg.inv(x) * 2", "[torch.randn(4, 4) + 4 * torch.eye(4)]"
    )
    b2 = compile_baseline(inv)
    assert not b2.complete and any("linalg_inv" in op for op in b2.host_ops)


def test_kegen_eval_baseline_compile_is_timed_by_the_evaluator_on_mtia() -> None:
    """`kegen eval --baseline compile`: the primary speedup is over torch.compile on the simulated chip."""
    import dataclasses

    from kegen.eval import EvalConfig, evaluate

    problem = "kegen/examples/softmax/problem.py"
    cfg = dataclasses.replace(EvalConfig(target="mtia", trials=1, profile=False), mtia_compile_baseline=True)
    r = evaluate(problem, "kegen/examples/softmax/seed.py", config=cfg)
    assert r.status.value == "ok", r.message
    assert r.times["compile"] > 0
    assert r.speedup == pytest.approx(r.times["compile"] / r.times["candidate"], rel=1e-6)
    assert r.speedups["compile"] == pytest.approx(r.speedup)


def test_kegen_eval_baseline_compile_is_refused_off_mtia(capsys) -> None:
    from kegen.cli import main

    code = main(["eval", "kegen/examples/softmax/problem.py", "kegen/examples/softmax/seed.py",
                 "--target", "cpu", "--baseline", "compile"])
    assert code == 2
    captured = capsys.readouterr()
    assert "--baseline compile is for --target mtia" in captured.err + captured.out
