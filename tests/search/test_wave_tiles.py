"""Wave-balanced tiles (mutations/waves/): runtime spans that fill every wave of PEs."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.mutations.base import MutationError
from kegen.search.operators.mutations.waves import HELPER, HELPER_SOURCE, wave_tile_mutations, wave_tiles

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
    assert spans((1536, 768), (256, 128), (6, 6), pes=64) == (192, 96)
    # 72 programs of 128x128 (two waves, the second nearly empty) -> 128 programs of 96x96
    assert spans((1536, 768), (128, 128), (12, 6), pes=64) == (96, 96)
    # already full waves, or too many waves to matter: the blocks themselves
    assert spans((2048, 2048), (256, 256), (8, 8), pes=64) == (256, 256)
    assert spans((4096, 4000), (64, 64), (64, 63), pes=64) == (64, 64)
    # a batch axis multiplies the programs: 4 batches x 3x3 tiles = 36 -> 4 x 4x4 = 64
    assert spans((300, 300), (128, 128), (3, 3, 4), pes=64) == (80, 80)
    # a flattened grid: the same 36 programs as one axis
    assert spans((1536, 768), (256, 128), (36,), pes=64) == (192, 96)


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
        grid = [-(-e // b) for e, b in zip(extents, blocks, strict=True)] + [others]
        got = spans(extents, blocks, tuple(grid), pes=pes)
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
    spans = f"block_m_span, block_n_span = {HELPER}((M, N), (BM, BN), (triton.cdiv(M, BM), triton.cdiv(N, BN)), pes=64)"
    assert spans in out
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
    assert (
        "BM, BN, BK = (128, 64, 32)" in out
        and "(M, N), (BM, BN), (triton.cdiv(M, BM), triton.cdiv(N, BN), batch), pes=16)" in out
    )
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


GROUPED = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_in_group = GROUP_M * num_pid_n
    group = pid // num_in_group
    first_m = group * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % num_in_group) % group_m
    pid_n = (pid % num_in_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=a.dtype)
        BM, BN = 64, 64
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        mm_kernel[grid](a, b, c, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=32, GROUP_M=2)
        return c
"""


def test_a_flattened_grouped_program_order_is_balanced_and_correct(tmp_path: Path) -> None:
    """The Triton tutorial's order: one program axis decoded into grouped tile indices, the tile
    counts computed in the kernel (they follow the spans) and a 1-D grid of their product."""
    out = wave_tiles(GROUPED, "mm_kernel", 5)
    assert "num_pid_m = tl.cdiv(M, block_m_span)" in out and "pid_n * block_n_span" in out
    assert "grid = (triton.cdiv(M, block_m_span) * triton.cdiv(N, block_n_span),)" in out
    assert f"{HELPER}((M, N), (BM, BN), (triton.cdiv(M, BM) * triton.cdiv(N, BN),), pes=5)" in out
    literal = GROUPED.replace("        BM, BN = 64, 64\n", "").replace("BM", "64").replace("BN", "64")
    with pytest.raises(MutationError, match="launched with one value"):  # which 64 is which: refused
        wave_tiles(literal, "mm_kernel", 5)
    problem = tmp_path / "problem.py"
    problem.write_text(GEMM_PROBLEM)
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message


def test_inline_program_ids_and_equal_literal_blocks_are_balanced(tmp_path: Path) -> None:
    """`tl.program_id(0) * BLOCK_M` written inline, both blocks launched as the literal 32: the
    program ids are hoisted and each literal is matched by its grid axis."""
    src = (SUITES / "default" / "mlp_bias_relu" / "seed.py").read_text()
    out = wave_tiles(src, "linear_kernel", 64)
    assert "kegen_pid_0 = tl.program_id(0)" in out and "kegen_pid_0 * block_m_span" in out
    assert "grid = (triton.cdiv(M, block_m_span), triton.cdiv(N, block_n_span))" in out
    assert f"{HELPER}((M, N), (32, 32), (triton.cdiv(M, 32), triton.cdiv(N, 32)), pes=64)" in out
    problem = tmp_path / "problem.py"
    problem.write_text((SUITES / "default" / "mlp_bias_relu" / "problem.py").read_text())
    res = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1))
    assert res.status.value == "ok", res.message


def test_a_convolution_halo_is_read_past_the_span_and_stays_correct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conv1d's input positions `pos + k - PAD` read a neighbour's halo: only the output positions
    are confined to the span (confining the halo too computed wrong edges)."""
    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.0625")
    src = (SUITES / "production" / "conv1d_fp16" / "seed.py").read_text()
    out = wave_tiles(src, "conv1d_kernel", 64)
    assert "src[None, :] < L" in out and "pos[None, :] < kegen_pid_2_lim" in out
    res = evaluate(
        SUITES / "production" / "conv1d_fp16" / "problem.py", out, config=EvalConfig(target="mtia", trials=1)
    )
    assert res.status.value == "ok", res.message


def test_a_kernel_that_stores_by_tile_index_or_uses_atomics_is_refused() -> None:
    src = _seed("gemm_fp16_2048")
    partial = src.replace(
        "    c_ptrs = c_ptr",
        "    tl.store(c_ptr + pid_m, tl.sum(tl.sum(acc, axis=1), axis=0))\n    c_ptrs = c_ptr",
    )
    assert partial != src
    with pytest.raises(MutationError, match="by tile index"):
        wave_tiles(partial, "matmul_kernel", 64)
    atomic = src.replace("tl.store(c_ptrs,", "tl.atomic_add(c_ptrs,")
    assert atomic != src
    with pytest.raises(MutationError, match="atomic"):
        wave_tiles(atomic, "matmul_kernel", 64)


def test_a_dual_core_launch_fills_waves_of_both_cores() -> None:
    """With dual_core a wave is 128 programs: 72 programs fill it poorly (balance towards 128),
    128 fill it exactly (nothing to do)."""
    src = _seed("gemm_fp16_2048").replace("BLOCK_K=BK)", "BLOCK_K=BK, dual_core=True)")
    assert "dual_core=True" in src
    muts = {m.name: m for m in wave_tile_mutations(src, _profile("matmul_kernel", 72))}
    assert "pes=128" in muts["wave_tiles@matmul_kernel"].apply(src)
    assert wave_tile_mutations(src, _profile("matmul_kernel", 128)) == []


CONV_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 24, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 8, 10, 10)]


def get_init_inputs():
    return []
"""


def test_an_extent_the_kernel_computes_below_its_program_ids_is_read_after_it(tmp_path) -> None:
    """Inductor's conv draft computes `M = BATCH * OD * OH * OW` after its program ids: the span's
    limit `min(M, ...)` goes after that line (it was put before it: NameError at compile)."""
    from kegen.search.operators.drafting import draft_seeds

    problem = tmp_path / "conv.py"
    problem.write_text(CONV_PROBLEM)
    source = draft_seeds(problem)[0][0].source
    balanced = wave_tiles(source, "kegen_conv_kernel", pes=64)
    fn = next(n for n in ast.parse(balanced).body if isinstance(n, ast.FunctionDef) and n.name == "kegen_conv_kernel")
    lines = [ast.unparse(s) for s in fn.body]
    m_def = next(i for i, line in enumerate(lines) if line.startswith("M = "))
    assert any(i > m_def and "tl.minimum(M," in line for i, line in enumerate(lines))
    r = evaluate(str(problem), balanced, config=EvalConfig(target="mtia", seed=4, trials=2))
    assert r.ok, r.message
