"""The rows-per-program move for row kernels (mutations/norms.py).

AST-level: on the production norm/softmax seeds after the one-block-per-row move, the body runs in
a pipelined row loop, row-invariant loads are hoisted, accumulators stay inside; kernels with
loops, two program ids or two-axis grids are left alone. Simulated: the rewritten kernels are
correct against PyTorch with a row count that ROWS_PER does not divide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.norms import norm_mutations, rewrite
from kegen.search.operators.mutations.rows import row_mutations
from kegen.suites import find_suite

PRODUCTION = {p.name: p for p in find_suite("production").problems}
NORMS = ("layer_norm_bf16", "rms_norm_fp16", "softmax_fp32")


def _one_block_per_row(name: str) -> str:
    seed = PRODUCTION[name].seed_path.read_text()
    (m,) = row_mutations(seed)
    return m.apply(seed)


@pytest.mark.parametrize("name", NORMS)
def test_the_norm_kernels_take_several_rows_per_program(name: str) -> None:
    src = _one_block_per_row(name)
    (m,) = norm_mutations(src)
    out = m.apply(src)
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
    loops = [n for n in fn.body if isinstance(n, ast.For)]
    assert len(loops) == 1 and "num_stages=2" in ast.unparse(loops[0].iter)
    assert "ROWS_PER_PROGRAM = 16\n" in out and "ROWS_PER=ROWS_PER_PROGRAM" in out
    assert "tl.program_id(0) * ROWS_PER" in out
    assert norm_mutations(out) == []  # it has a loop now


def test_row_invariant_loads_are_hoisted_and_accumulators_stay_in_the_loop() -> None:
    out = rewrite(_one_block_per_row("layer_norm_bf16"), "layer_norm_kernel")
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
    before = "\n".join(ast.unparse(s) for s in fn.body if not isinstance(s, ast.For))
    inside = ast.unparse(next(s for s in fn.body if isinstance(s, ast.For)))
    assert "w = tl.load(w_ptr" in before and "b = tl.load(b_ptr" in before
    assert "acc = tl.zeros" in inside and "x = tl.load(x_ptr + row * stride_x" in inside


@pytest.mark.parametrize("name", NORMS)
def test_kernels_with_loops_are_left_alone(name: str) -> None:
    seed = PRODUCTION[name].seed_path.read_text()  # the seeds walk their rows in chunks
    assert norm_mutations(seed) == []
    with pytest.raises(MutationError):
        rewrite(seed, "no_such_kernel")


def test_two_axis_grids_are_left_alone() -> None:
    src = _one_block_per_row("rms_norm_fp16")
    launch = next(line for line in src.splitlines() if "rms_norm_kernel[" in line)
    grid = launch[launch.index("[") + 1 : launch.index("]")]
    assert norm_mutations(src.replace(f"[{grid}]", f"[({grid.strip('(),')}, 1)]")) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", NORMS)
def test_rewritten_norms_are_correct_on_the_simulator(name: str, tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    problem = tmp_path / f"{name}.py"
    problem.write_text(PRODUCTION[name].problem_path.read_text() + "\n\nROWS = 37\nCOLS = 200\n")
    out = rewrite(_one_block_per_row(name), next(iter(m.kernel for m in norm_mutations(_one_block_per_row(name)))))
    r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"
