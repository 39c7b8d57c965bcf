"""The rows-per-program and row-pipeline moves for row kernels (mutations/memory/norms.py).

AST-level: on the production norm/softmax seeds after the one-block-per-row move, the body runs in
a row loop, row-invariant loads are hoisted, accumulators stay inside; kernels with loops, two
program ids or two-axis grids are left alone. The pipelined form loads the next row at the top of
each iteration and stores each row in the next one (the last after the loop), and refuses loops it
cannot reorder. Simulated: the rewritten kernels are correct against PyTorch with a row count that
ROWS_PER does not divide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError, vectorize_mutations
from kegen.search.operators.mutations.memory.norms import (
    LOOP_PIPELINE_PRIOR,
    PIPELINE_PRIOR,
    STAGE_PRIOR,
    norm_mutations,
    pipeline,
    rewrite,
    stage_loops,
)
from kegen.search.operators.mutations.rows import row_mutations
from kegen.search.operators.templates.linear_stationary import stationary_mutations
from kegen.suites import find_suite

PRODUCTION = {p.name: p for p in find_suite("production").problems}
NORMS = ("layer_norm_bf16", "rms_norm_fp16", "softmax_fp32")


def _one_block_per_row(name: str) -> str:
    seed = PRODUCTION[name].seed_path.read_text()
    (m,) = row_mutations(seed)
    return m.apply(seed)


def _move(src: str, prefix: str):  # type: ignore[no-untyped-def]
    (m,) = [m for m in norm_mutations(src) if m.name.startswith(prefix)]
    return m


@pytest.mark.parametrize("name", NORMS)
def test_the_norm_kernels_take_several_rows_per_program(name: str) -> None:
    src = _one_block_per_row(name)
    out = _move(src, "rows_per_program=16@").apply(src)
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
    loops = [n for n in fn.body if isinstance(n, ast.For)]
    assert len(loops) == 1 and "num_stages=2" in ast.unparse(loops[0].iter)
    assert "ROWS_PER_PROGRAM = 16\n" in out and "ROWS_PER=ROWS_PER_PROGRAM" in out
    assert "tl.program_id(0) * ROWS_PER" in out
    # it has a loop now: only the pipelined form of that loop is left
    assert [m.name for m in norm_mutations(out)] == [f"row_pipeline@{fn.name}"]


@pytest.mark.parametrize("name", NORMS)
def test_the_pipelined_rows_move_is_proposed_first(name: str) -> None:
    src = _one_block_per_row(name)
    moves = norm_mutations(src)
    assert [m.name.split("@")[0] for m in moves] == ["rows_per_program=16,pipelined", "rows_per_program=16"]
    assert moves[0].prior == PIPELINE_PRIOR > moves[1].prior
    assert PIPELINE_PRIOR > max(m.prior for m in row_mutations(PRODUCTION[name].seed_path.read_text()))
    out = moves[0].apply(src)
    assert norm_mutations(out) == []  # pipelined already
    assert out == pipeline(moves[1].apply(src), moves[0].kernel)  # the same as the two steps


def test_the_pipelined_loop_loads_the_next_row_first_and_stores_each_row_in_the_next_iteration() -> None:
    src = _one_block_per_row("layer_norm_bf16")
    out = rewrite(src, "layer_norm_kernel", pipelined=True)
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
    at = next(i for i, s in enumerate(fn.body) if isinstance(s, ast.For))
    loop = fn.body[at]
    assert isinstance(loop, ast.For)
    before = [ast.unparse(s) for s in fn.body[:at]]
    body = [ast.unparse(s) for s in loop.body]
    after = [ast.unparse(s) for s in fn.body[at + 1 :]]
    held = next(i for i, s in enumerate(before) if s.startswith("out_prev = tl.zeros("))
    first = next(
        i for i, s in enumerate(before) if s.startswith("x_cur = tl.load(x_ptr + first_row * stride_x")
    )
    assert held < first  # the held output is carried (and copied at the yield) before the rows
    assert "mask=mask & (first_row < row_hi)" in before[first]
    assert body[0].startswith("x_next = tl.load(x_ptr + (row + 1) * stride_x")
    assert "mask=mask & (row + 1 < row_hi)" in body[0]
    assert body[1].startswith("tl.store(y_ptr + (row - 1) * stride_y") and "(row > first_row)" in body[1]
    assert "x = x_cur.to(tl.float32)" in body and body[-1] == "x_cur = x_next"
    assert "out_prev = y.to(y_ptr.dtype.element_ty)" in body
    assert len(after) == 1 and after[0].startswith(
        "tl.store(y_ptr + (row_hi - 1) * stride_y + start + offs, out_prev,"
    )
    assert "mask=mask & (row_hi > first_row)" in after[0]
    assert ast.unparse(loop.iter) == "tl.range(first_row, row_hi, num_stages=2)"


_LOOP = """
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, idx_ptr, n, lo, hi, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for r in range(lo, hi):
        BODY
"""


def _loop(body: str) -> str:
    return _LOOP.replace("BODY", body.strip().replace("\n", "\n        "))


def test_the_row_pipeline_takes_a_plain_row_loop_and_inlines_row_addresses() -> None:
    src = _loop("""
p = x_ptr + r * n + offs
v = tl.load(p, mask=offs < n)
tl.store(y_ptr + r * n + offs, v * 2.0, mask=offs < n)
""")
    (m,) = norm_mutations(src)
    assert m.name == "row_pipeline@k" and m.prior == LOOP_PIPELINE_PRIOR
    out = m.apply(src)
    assert "v_cur = tl.load(x_ptr + lo * n + offs, mask=(offs < n) & (lo < hi))" in out
    assert "v_next = tl.load(x_ptr + (r + 1) * n + offs, mask=(offs < n) & (r + 1 < hi))" in out
    assert "out_prev = (v * 2.0).to((y_ptr + r * n + offs).dtype.element_ty)" in out
    assert "tl.store(y_ptr + (hi - 1) * n + offs, out_prev, mask=(offs < n) & (hi > lo))" in out
    assert norm_mutations(out) == []


@pytest.mark.parametrize(
    "body",
    [
        "v = tl.load(x_ptr + r * n + offs)\nif r > 0:\n    v = v + 1.0\ntl.store(y_ptr + r * n + offs, v)",
        "v = tl.load(y_ptr + (r - 1) * n + offs)\ntl.store(y_ptr + r * n + offs, v + 1.0)",
        "v = tl.load(x_ptr + r * n + offs)\ns = tl.sum(v, axis=0).to(tl.int32)\ntl.store(y_ptr + s + offs, v)",
        "v = tl.load(x_ptr + offs)\ntl.atomic_add(y_ptr + r, tl.sum(v, axis=0))",
        "r = r + 1\nv = tl.load(x_ptr + r * n + offs)\ntl.store(y_ptr + r * n + offs, v)",
    ],
    ids=["control_flow", "reads_its_output", "computed_address", "atomics", "row_reassigned"],
)
def test_the_row_pipeline_refuses_loops_it_cannot_reorder(body: str) -> None:
    src = _loop(body)
    assert norm_mutations(src) == []
    with pytest.raises(MutationError):
        pipeline(src, "k")


def test_row_invariant_loads_are_hoisted_and_accumulators_stay_in_the_loop() -> None:
    out = rewrite(_one_block_per_row("layer_norm_bf16"), "layer_norm_kernel")
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef))
    before = "\n".join(ast.unparse(s) for s in fn.body if not isinstance(s, ast.For))
    inside = ast.unparse(next(s for s in fn.body if isinstance(s, ast.For)))
    assert "w = tl.load(w_ptr" in before and "b = tl.load(b_ptr" in before
    assert "acc = tl.zeros" in inside and "x = tl.load(x_ptr + row * stride_x" in inside


@pytest.mark.parametrize("name", NORMS)
def test_kernels_with_loops_are_left_alone(name: str) -> None:
    seed = PRODUCTION[name].seed_path.read_text()  # the seeds walk their rows in chunks of BLOCK
    # the chunk loops become one block per row (rows.py): neither staged nor pipelined here
    assert norm_mutations(seed) == []
    kernel = next(iter(m.kernel for m in row_mutations(seed)))
    assert "num_stages=2" in stage_loops(seed, kernel)  # the staging itself would apply
    with pytest.raises(MutationError):
        rewrite(seed, "no_such_kernel")
    with pytest.raises(MutationError):
        pipeline(seed, kernel)  # loops over chunks, not rows


def test_the_jagged_softmax_gets_the_pipeline_per_row_and_stages_per_row_block() -> None:
    seed = PRODUCTION["jagged_softmax_fp32"].seed_path.read_text()
    assert [m.name for m in norm_mutations(seed)] == ["row_pipeline@jagged_softmax_kernel"]
    (vec,) = [m for m in vectorize_mutations(seed) if m.name.startswith("vectorize_rows=32@")]
    src = vec.apply(seed)
    m, dual = norm_mutations(src)
    assert m.name == "row_block_stages=2@jagged_softmax_kernel" and m.prior == STAGE_PRIOR
    assert dual.name == "row_block_stages=2+dual_core@jagged_softmax_kernel" and dual.prior < m.prior
    out = m.apply(src)
    assert out.count("tl.range(start, end, R, num_stages=2)") == 3
    assert norm_mutations(out) == []  # staged already
    both = dual.apply(src)
    assert both.count("num_stages=2)") == 3 and "R=32, dual_core=True)" in both
    launched = src.replace("R=32)", "R=32, num_stages=2)")
    assert launched != src and norm_mutations(launched) == []  # the launch stages every loop already


def test_two_axis_grids_are_left_alone() -> None:
    src = _one_block_per_row("rms_norm_fp16")
    launch = next(line for line in src.splitlines() if "rms_norm_kernel[" in line)
    grid = launch[launch.index("[") + 1 : launch.index("]")]
    assert norm_mutations(src.replace(f"[{grid}]", f"[({grid.strip('(),')}, 1)]")) == []


def _evaluate(name: str, source: str, tmp_path: Path, extra: str) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    problem = tmp_path / f"{name}.py"
    problem.write_text(PRODUCTION[name].problem_path.read_text() + "\n\n" + extra)
    r = evaluate(
        problem, source, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True)
    )
    assert r.status.value == "ok", f"{r.status} {r.message}"


@pytest.mark.slow
@pytest.mark.parametrize("name", NORMS)
def test_rewritten_norms_are_correct_on_the_simulator(name: str, tmp_path: Path) -> None:
    src = _one_block_per_row(name)
    _evaluate(name, _move(src, "rows_per_program=16@").apply(src), tmp_path, "ROWS = 37\nCOLS = 200\n")


@pytest.mark.parametrize("name", NORMS)
def test_pipelined_norms_are_correct_on_the_simulator(name: str, tmp_path: Path) -> None:
    # 37 rows: two full programs and one of 5 rows; 200 columns: the row mask is ragged
    src = _one_block_per_row(name)
    _evaluate(
        name, _move(src, "rows_per_program=16,pipelined").apply(src), tmp_path, "ROWS = 37\nCOLS = 200\n"
    )


def test_the_pipelined_jagged_softmax_seed_is_correct_on_the_simulator(tmp_path: Path) -> None:
    # segments of 0 rows (an empty loop: nothing stored) and of many rows
    seed = PRODUCTION["jagged_softmax_fp32"].seed_path.read_text()
    _evaluate("jagged_softmax_fp32", _move(seed, "row_pipeline").apply(seed), tmp_path, "NUM_SEGMENTS = 24\n")


def test_the_staged_jagged_softmax_is_correct_on_the_simulator(tmp_path: Path) -> None:
    seed = PRODUCTION["jagged_softmax_fp32"].seed_path.read_text()
    (vec,) = [m for m in vectorize_mutations(seed) if m.name.startswith("vectorize_rows=32@")]
    src = vec.apply(seed)
    _evaluate(
        "jagged_softmax_fp32", _move(src, "row_block_stages=2@").apply(src), tmp_path, "NUM_SEGMENTS = 24\n"
    )
    _evaluate(
        "jagged_softmax_fp32",
        _move(src, "row_block_stages=2+dual").apply(src),
        tmp_path,
        "NUM_SEGMENTS = 24\n",
    )


def test_a_hand_pipelined_row_loop_is_not_staged_again() -> None:
    """linear_stationary's M loop prefetches the next tile itself: a ring of stages on top would
    double its input tiles (a search overflowed the local store that way)."""
    seed = (
        Path(__file__).parents[2] / "kegen" / "suites" / "production" / "gemm_fp16_512" / "seed.py"
    ).read_text()
    stationary = stationary_mutations(seed)[1].apply(seed)
    assert "_next = tl.load(" in stationary
    assert not [m.name for m in norm_mutations(stationary) if m.name.startswith("row_block_stages")]
