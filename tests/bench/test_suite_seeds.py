"""Every problem of the default suite: its seed is correct under Triton's CPU interpreter.

The checks run in one child process (interpreter mode must not leak into this one). By default at
the odd edge sizes `kegen eval` also tries (which catches power-of-two assumptions and missing
masks, and is quicker). The check at the problems' own sizes too (~50 s) is
`python -m kegen.suites.interpreter default`; `kegen bench` runs those sizes on the simulator.
"""

from __future__ import annotations

import pytest
import torch

from kegen.suites import SuiteProblem, find_suite
from kegen.suites.interpreter import InterpreterCheck, check_problems

SUITE = find_suite("default")


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, InterpreterCheck]:
    return {r.name: r for r in check_problems(SUITE.root, seed=3, sizes_mode="edge")}


def test_default_suite_covers_the_issue_op_classes() -> None:
    classes = {p.op_class for p in SUITE.problems}
    assert len(SUITE.problems) >= 20
    assert {"gemm", "normalization", "elementwise", "reduction", "convolution", "embedding", "jagged",
            "attention", "interaction", "scan"} <= classes
    assert sum(p.kind == "fusion" for p in SUITE.problems) >= 4
    assert {p.dtype for p in SUITE.problems} >= {"float32", "float16", "bfloat16"}


@pytest.mark.parametrize("problem", SUITE.problems, ids=lambda p: p.name)
def test_seed_matches_reference_under_interpreter(problem: SuiteProblem, interpreter_results) -> None:
    assert problem.name in interpreter_results, f"{problem.name} was not checked"
    result = interpreter_results[problem.name]
    assert result.ok, f"{problem.name}: {result.message}"
    assert result.max_abs_error < 0.1


@pytest.mark.parametrize("problem", SUITE.problems, ids=lambda p: p.name)
def test_problem_inputs_are_seeded_cpu_tensors(problem: SuiteProblem) -> None:
    from kegen.suites.interpreter import _load

    mod = _load(problem.problem_path, "inputs")
    torch.manual_seed(7)
    a = mod.get_inputs()
    torch.manual_seed(7)
    b = mod.get_inputs()
    assert all(x.device.type == "cpu" for x in a)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert isinstance(mod.get_init_inputs(), list)


def test_a_broken_seed_is_reported_not_raised(tmp_path) -> None:
    src = SUITE.select(["row_sum"]).problems[0]
    folder = tmp_path / "row_sum"
    folder.mkdir()
    (folder / "problem.py").write_text(src.problem_path.read_text())
    # off by one: the kernel skips the last chunk of every row
    (folder / "seed.py").write_text(src.seed_path.read_text().replace("range(0, n_cols, BLOCK)",
                                                                      "range(0, n_cols - BLOCK, BLOCK)"))
    [result] = check_problems(tmp_path, sizes_mode="default")
    assert result.name == "row_sum"
    assert not result.ok
    assert "max abs error" in result.message


def test_a_seed_that_assumes_power_of_two_sizes_fails_at_edge_sizes(tmp_path) -> None:
    src = SUITE.select(["attention_fwd"]).problems[0]
    folder = tmp_path / "attention_fwd"
    folder.mkdir()
    (folder / "problem.py").write_text(src.problem_path.read_text())
    seed = src.seed_path.read_text().replace("BLOCK_D=triton.next_power_of_2(head_dim)", "BLOCK_D=head_dim")
    (folder / "seed.py").write_text(seed)
    [result] = check_problems(tmp_path, sizes_mode="edge")
    assert not result.ok
    assert "power of 2" in result.message and "HEAD_DIM" in result.message
