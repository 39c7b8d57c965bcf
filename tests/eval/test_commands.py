"""`kegen eval`, `kegen run` and `kegen profile` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from eval_helpers import candidate, needs_mtia, problem

from kegen.cli import main


def _cli(command: str, prob: str, cand: str, target: str, *rest: str) -> int:
    """Run `kegen COMMAND` on fixture problem `prob` and candidate `cand` for `target`."""
    argv = [command, str(problem(prob)), str(candidate(cand)), "--target", target, *rest]
    return main([*argv, "--timeout", "120"])


def test_eval_json_is_one_object_tools_can_rely_on(capsys) -> None:
    code = _cli("eval", "vector_add", "vector_add_ok", "cpu", "--trials", "2", "--json")
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["status"] == "ok"
    for key in ("max_abs_error", "times", "speedups", "fitness", "profile", "seeds"):
        assert key in data
    assert data["speedups"]["eager"] == data["speedup"]


def test_eval_text_verdict_and_exit_code_on_failure(capsys) -> None:
    code = _cli("eval", "vector_add", "vector_add_wrong", "cpu")
    out = capsys.readouterr().out
    assert code == 1 and "verdict: INCORRECT" in out and "differs at index" in out


def test_eval_reports_a_broken_problem_with_exit_code_2(capsys) -> None:
    code = _cli("eval", "broken_problem", "vector_add_ok", "cpu")
    assert code == 2 and "lacks get_inputs" in capsys.readouterr().err


def test_run_prints_outputs_and_time_on_given_inputs(capsys, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.pt"
    torch.save([torch.ones(8192), torch.full((8192,), 2.0)], inputs)
    code = _cli("run", "vector_add", "vector_add_ok", "cpu", "--inputs", str(inputs))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "output 0: shape (8192,) float32, mean 3" in out and "matches reference: True" in out
    assert "time (measured)" in out


@needs_mtia()
def test_profile_on_mtia_prints_units_and_writes_a_perfetto_trace(capsys, tmp_path: Path) -> None:
    trace = tmp_path / "softmax.trace.json"
    code = _cli("profile", "softmax", "softmax_ok", "mtia", "--trace", str(trace))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "softmax_kernel" in out and "DMA" in out and "roofline" in out
    assert trace.exists() and "traceEvents" in json.loads(trace.read_text())
