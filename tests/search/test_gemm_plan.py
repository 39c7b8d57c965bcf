"""The store-overlap split of a dot kernel (mutations/gemm_plan.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.gemm_plan import gemm_plan_mutations, split_store, swap_axes

PRODUCTION = Path(__file__).parents[2] / "kegen" / "suites" / "production"

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(80, 96, dtype=torch.float16), torch.randn(96, 200, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def _seed(bm: int, bn: int, bk: int) -> str:
    src = (PRODUCTION / "gemm_fp16_2048" / "seed.py").read_text()
    return src.replace("BM, BN, BK = 64, 64, 32", f"BM, BN, BK = {bm}, {bn}, {bk}")


def test_the_first_half_is_stored_from_the_second_half_loop() -> None:
    muts = {m.name: m for m in gemm_plan_mutations(_seed(64, 256, 32))}
    assert set(muts) == {
        f"split_store{x2}{swap}@matmul_kernel" for x2 in ("", "x2") for swap in ("", "+swap_axes")
    }
    out = muts["split_store@matmul_kernel"].apply(_seed(64, 256, 32))
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef) and n.name == "matmul_kernel")
    loops = [s for s in fn.body if isinstance(s, ast.For)]
    assert len(loops) == 2
    first = loops[1].body[0]
    assert isinstance(first, ast.If) and ast.unparse(first.test) == "k_h1 == 0"
    assert "tl.store" in ast.unparse(first) and "kegen_tile_h0" in ast.unparse(first)
    assert "tl.zeros((BLOCK_M, BLOCK_N // 2)" in out and "BM, BN, BK = (64, 256, 32)" in out  # same launch
    doubled = muts["split_storex2@matmul_kernel"].apply(_seed(64, 256, 32))
    assert "BM, BN, BK = (64, 512, 32)" in doubled and "triton.cdiv(N, BN)" in doubled
    assert gemm_plan_mutations(out) == []  # not split twice
    assert gemm_plan_mutations(_seed(64, 64, 32)) == []  # halves narrower than MIN_HALF
    assert [m.name for m in gemm_plan_mutations(_seed(64, 128, 32))] == [
        "split_storex2@matmul_kernel",
        "split_storex2+swap_axes@matmul_kernel",
    ]


def test_swapped_axes_walk_n_first() -> None:
    out = swap_axes(_seed(64, 128, 32), "matmul_kernel")
    assert "pid_m = tl.program_id(1)" in out and "pid_n = tl.program_id(0)" in out
    assert "grid = (triton.cdiv(N, BN), triton.cdiv(M, BM))" in out
    back = swap_axes(out, "matmul_kernel")  # exchanging twice is the original
    assert ast.dump(ast.parse(back)) == ast.dump(ast.parse(_seed(64, 128, 32)))


def test_split_tiles_are_correct_on_the_simulator(tmp_path: Path) -> None:
    """200 columns in one block of 256 (halves of 128: the second half is mostly mask); the same from a
    block of 128 doubled, with the program axes exchanged."""
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    for out in (
        split_store(_seed(64, 256, 32), "matmul_kernel"),
        split_store(swap_axes(_seed(64, 128, 32), "matmul_kernel"), "matmul_kernel", double=True),
    ):
        res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
        assert res.status.value == "ok", res.message
