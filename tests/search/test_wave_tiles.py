"""Wave-balanced tiles (mutations/wave_tiles.py): runtime spans that fill every wave of PEs."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.wave_tiles import HELPER, HELPER_SOURCE, wave_tile_mutations, wave_tiles

SUITES = Path(__file__).parents[2] / "kegen" / "suites"

GEMM_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(176, 64, dtype=torch.float16), torch.randn(64, 200, dtype=torch.float16)]


def get_init_inputs():
    return []
"""

BMM_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(3, 144, 32, dtype=torch.float16), torch.randn(3, 32, 80, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def _spans() -> Any:
    scope: dict[str, Any] = {}
    exec(HELPER_SOURCE, scope)  # noqa: S102 - the helper the move writes into candidates
    return scope[HELPER]


def _seed(problem: str, blocks: str | None = None, new: str | None = None) -> str:
    src = (SUITES / "production" / problem / "seed.py").read_text()
    if blocks is not None and new is not None:
        assert blocks in src
        src = src.replace(blocks, new)
    return src


def _profile(kernel: str, programs: int, pes: int = 64) -> SimpleNamespace:
    return SimpleNamespace(launches=[SimpleNamespace(kernel=kernel, programs=programs, pes_total=pes)])


def test_spans_fill_the_waves_the_blocks_need() -> None:
    spans = _spans()
    # 1536x768 in 256x128 blocks: 36 programs on 64 PEs -> 8x8 programs of 192x96 (one full wave)
    assert spans((1536, 768), (256, 128), 1, pes=64) == (192, 96)
    # 72 programs of 128x128 (two waves, the second nearly empty) -> 128 programs of 96x96
    assert spans((1536, 768), (128, 128), 1, pes=64) == (96, 96)
    # already full waves, or too many waves to matter: the blocks themselves
    assert spans((2048, 2048), (256, 256), 1, pes=64) == (256, 256)
    assert spans((4096, 4000), (64, 64), 1, pes=64) == (64, 64)
    # a batch axis multiplies the programs: 4 batches x 3x3 tiles = 36 -> 4 x 4x4 = 64
    assert spans((300, 300), (128, 128), 4, pes=64) == (80, 80)


def test_spans_cover_the_extents_within_the_waves() -> None:
    """Random extents and blocks: every span is at most its block and a multiple of 16 (or the
    block), the spans cover the extents, and the programs never need more waves than the blocks."""
    spans = _spans()
    rng = random.Random(7)
    for _ in range(400):
        axes = rng.choice((1, 2))
        extents = [rng.randint(1, 5000) for _ in range(axes)]
        blocks = [rng.choice((16, 32, 64, 128, 256)) for _ in range(axes)]
        others = rng.choice((1, 1, 2, 3, 16))
        pes = rng.choice((4, 16, 64))
        got = spans(extents, blocks, others, pes=pes)
        count = others
        base = others
        for e, b, s in zip(extents, blocks, got):
            assert 0 < s <= b and (s % 16 == 0 or s == b)
            count *= -(-e // s)
            base *= -(-e // b)
        assert -(-count // pes) == -(-base // pes), (extents, blocks, others, pes, got)
        assert count >= base


def test_the_kernel_gets_span_parameters_and_confined_masks() -> None:
    src = _seed("gemm_fp16_2048")
    out = wave_tiles(src, "matmul_kernel", 64)
    tree = ast.parse(out)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "matmul_kernel")
    assert [a.arg for a in fn.args.args][-2:] == ["block_m_span", "block_n_span"]
    assert "pid_m * block_m_span + tl.arange(0, BLOCK_M)" in out
    assert "pid_m_lim = tl.minimum(M, pid_m * block_m_span + block_m_span)" in out
    assert "offs_m[:, None] < pid_m_lim" in out and "offs_m[:, None] < M" not in out
    assert f"block_m_span, block_n_span = {HELPER}((M, N), (BM, BN), 1, pes=64)" in out
    assert "triton.cdiv(M, block_m_span)" in out and "block_n_span=block_n_span" in out
    with pytest.raises(MutationError, match="already wave-balanced"):
        wave_tiles(out, "matmul_kernel", 64)


def test_moves_are_offered_only_where_a_wave_is_partial() -> None:
    src = _seed("gemm_fp16_2048")
    names = {m.name for m in wave_tile_mutations(src, _profile("matmul_kernel", 72))}
    assert names == {
        "wave_tiles@matmul_kernel",
        "wave_tiles+2xBLOCK_M@matmul_kernel",
        "wave_tiles+2xBLOCK_N@matmul_kernel",
    }
    # 1024 programs (16 full waves): nothing to balance
    assert wave_tile_mutations(src, _profile("matmul_kernel", 1024)) == []
    # 128 programs: two full waves as they are; doubled blocks give 64 (one full wave): nothing
    assert wave_tile_mutations(src, _profile("matmul_kernel", 128)) == []
    balanced = wave_tiles(src, "matmul_kernel", 64)
    again = [m.name for m in wave_tile_mutations(balanced, _profile("matmul_kernel", 72))]
    assert again and all(n.startswith("wave_tiles_regrow") for n in again)  # not balanced twice
    # no dot, no move
    assert wave_tile_mutations(_seed("softmax_fp32"), _profile("softmax_kernel", 72)) == []


def test_an_unmasked_axis_is_refused() -> None:
    src = (
        _seed("gemm_fp16_2048")
        .replace("(offs_m[:, None] < M) & ", "")
        .replace(", mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)", ", mask=offs_n[None, :] < N")
    )
    if "offs_m[:, None] < M" in src:
        pytest.skip("the seed's masks changed form")
    with pytest.raises(MutationError, match="never masked"):
        wave_tiles(src, "matmul_kernel", 64)


@pytest.mark.parametrize("pes", [64, 5])
def test_balanced_gemm_is_correct_on_the_simulator(tmp_path: Path, pes: int) -> None:
    """176x200 in 64x64 blocks (12 programs, ragged on both axes) spread over `pes` PEs."""
    problem = tmp_path / "problem.py"
    problem.write_text(GEMM_PROBLEM)
    out = wave_tiles(_seed("gemm_fp16_2048"), "matmul_kernel", pes)
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message


def test_balanced_bmm_and_doubled_block_are_correct_on_the_simulator(tmp_path: Path) -> None:
    """A batch axis in the grid (others = batch) and the BLOCK_M-doubled variant."""
    problem = tmp_path / "problem.py"
    problem.write_text(BMM_PROBLEM)
    src = _seed("bmm_fp16")
    muts = {m.name: m for m in wave_tile_mutations(src, _profile("bmm_kernel", 9, pes=16))}
    out = muts["wave_tiles+2xBLOCK_M@bmm_kernel"].apply(src)
    assert "BM, BN, BK = (128, 64, 32)" in out and "(M, N), (BM, BN), batch, pes=16)" in out
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message


def test_a_balanced_kernel_over_several_waves_regrows_its_blocks() -> None:
    """Balanced 64x64 blocks in two waves: doubling a block halves the waves, the spans follow at run
    time (the grid and the kernel stay as the balance wrote them)."""
    balanced = wave_tiles(_seed("gemm_fp16_2048"), "matmul_kernel", 64)
    muts = {m.name: m for m in wave_tile_mutations(balanced, _profile("matmul_kernel", 128))}
    assert set(muts) == {
        "wave_tiles_regrow+2xBLOCK_M@matmul_kernel",
        "wave_tiles_regrow+2xBLOCK_N@matmul_kernel",
    }
    out = muts["wave_tiles_regrow+2xBLOCK_M@matmul_kernel"].apply(balanced)
    assert "BM, BN, BK = (128, 64, 32)" in out and "triton.cdiv(M, block_m_span)" in out
    assert wave_tile_mutations(balanced, _profile("matmul_kernel", 64)) == []  # one wave already
