"""The M-halves rewrite of a dot kernel (templates/m_halves.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations import MutationError
from kegen.search.operators.templates.linear_stationary import stationary_mutations
from kegen.search.operators.templates.m_halves import m_halves_mutations, rewrite

from .test_gemm_plan import PROBLEM

SUITES = Path(__file__).parents[2] / "kegen" / "suites"


def _seed(name: str, blocks: str = "64, 64, 32") -> str:
    src = (SUITES / "production" / name / "seed.py").read_text()
    return src.replace("BM, BN, BK = 64, 64, 32", f"BM, BN, BK = {blocks}")


def test_the_halves_share_one_k_loop_and_store_in_turn() -> None:
    (move,) = m_halves_mutations(_seed("gemm_fp16_512"))
    assert move.name == "m_halves@matmul_kernel" and move.family == "store_overlap"
    out = move.apply(_seed("gemm_fp16_512"))
    fn = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef) and n.name == "matmul_kernel")
    (loop,) = [s for s in fn.body if isinstance(s, ast.For)]
    text = [ast.unparse(s) for s in loop.body]
    assert sum("tl.load(b_ptr" in t for t in text) == 1  # B once per K step
    assert [t for t in text if "tl.dot" in t] == ["acc += tl.dot(a, b)", "acc_h1 += tl.dot(a_h1, b)"]
    tail = [ast.unparse(s) for s in fn.body[fn.body.index(loop) + 1 :]]
    stores = [i for i, t in enumerate(tail) if t.startswith("tl.store(")]
    assert len(stores) == 2 and "acc.to(" in tail[stores[0]] and "acc_h1.to(" in tail[stores[1]]
    assert "offs_m_h1 = offs_m + BLOCK_M // 2" in out and "tl.zeros((BLOCK_M // 2, BLOCK_N)" in out
    assert m_halves_mutations(out) == []  # two accumulators: not a plan-form kernel any more


def test_kernels_it_cannot_split_are_refused() -> None:
    src = _seed("gemm_fp16_512").replace(
        "mask=(offs_m[:, None] < M) & (offs_n", "mask=(offs_m[:, None] < M + 0 * BLOCK_M) & (offs_n"
    )
    with pytest.raises(MutationError, match="sizes more than"):
        rewrite(src, "matmul_kernel")
    with pytest.raises(MutationError, match="halves below 32 rows"):
        rewrite(_seed("gemm_fp16_512", "32, 128, 64"), "matmul_kernel")
    with pytest.raises(MutationError, match="no jit kernel"):
        rewrite(src, "other_kernel")
    assert m_halves_mutations((SUITES / "production" / "softmax_fp32" / "seed.py").read_text()) == []
    stationary = stationary_mutations(_seed("linear_bias_gelu_bf16"))[0].apply(_seed("linear_bias_gelu_bf16"))
    assert m_halves_mutations(stationary) == []  # only its fallback is plan-form, and that rarely runs


@pytest.mark.parametrize("blocks", ["64, 64, 32", "128, 32, 64"])
def test_the_halves_are_correct_on_the_simulator(tmp_path: Path, blocks: str) -> None:
    """80 x 96 @ 96 x 200: the last M block's second half (rows 96..127 with 64-row blocks) all masked."""
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    seed = _seed("gemm_fp16_512", blocks)
    res = evaluate(
        problem, m_halves_mutations(seed)[0].apply(seed), config=EvalConfig(target="mtia", trials=1)
    )
    assert res.status.value == "ok", res.message


def test_an_epilogue_is_computed_per_half_on_the_simulator(tmp_path: Path) -> None:
    text = (SUITES / "production" / "linear_bias_gelu_bf16" / "problem.py").read_text()
    problem = tmp_path / "problem.py"
    problem.write_text(
        text.replace("_size(4096)", "70").replace("_size(512)", "48").replace("_size(2048)", "80")
    )
    seed = _seed("linear_bias_gelu_bf16")
    out = m_halves_mutations(seed)[0].apply(seed)
    assert out.count("tl.load(b_ptr") == 1  # the bias (by N) is shared by the halves
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message
