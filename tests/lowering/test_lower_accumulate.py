"""Atomics whose result is unused become RED_ACCUMULATE (reduction network), not DMA_ATOMIC."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from lowering.backend import driver
from lowering.options import MtiaOptions
from lowering.pipeline import search_space
from mtia_sim.events import CommandEvent
from mtia_sim.isa import Op


def _ops() -> Counter[Op]:
    """Commands of the last launch, by opcode."""
    return Counter(e.op for t in driver.last_launch().traces for e in t.events if isinstance(e, CommandEvent))


@triton.jit
def splitk_kernel(
    a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.program_id(2) * BK, K, BK * SPLIT):
        rk = k + tl.arange(0, BK)
        x = tl.load(a + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        y = tl.load(b + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    tl.atomic_add(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _splitk(red_accumulate: bool) -> tuple[torch.Tensor, float, Counter[Op]]:
    torch.manual_seed(0)
    M, N, K = 40, 48, 256  # ragged edges: the box mask shrinks the accumulated block
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32), 4)
    splitk_kernel[grid](a, b, c, M, N, K, BM=32, BN=32, BK=32, SPLIT=4, red_accumulate=red_accumulate)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    return c, driver.last_launch().cycles, _ops()


def test_split_k_matmul_accumulates_over_the_reduction_network() -> None:
    c_red, cyc_red, ops_red = _splitk(True)
    c_atomic, cyc_atomic, ops_atomic = _splitk(False)
    assert ops_red[Op.RED_ACCUMULATE] == 16 and ops_red[Op.DMA_ATOMIC] == 0, ops_red
    assert ops_atomic[Op.DMA_ATOMIC] == 16 and ops_atomic[Op.RED_ACCUMULATE] == 0, ops_atomic
    torch.testing.assert_close(c_red, c_atomic, atol=1e-5, rtol=1e-5)
    assert cyc_red < cyc_atomic, (cyc_red, cyc_atomic)


@triton.jit
def colsum_kernel(x_ptr, out_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.arange(0, BC)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + cols, tl.sum(x, axis=0), mask=cols < C)


@triton.jit
def total_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@pytest.mark.parametrize("red_accumulate", [True, False])
def test_grid_wide_sums_match_torch(red_accumulate: bool) -> None:
    torch.manual_seed(1)
    R, C = 300, 50
    x = torch.randn(R, C)
    out = torch.zeros(C)
    colsum_kernel[(triton.cdiv(R, 16),)](x, out, R, C, BR=16, BC=64, red_accumulate=red_accumulate)
    torch.testing.assert_close(out, x.sum(0), atol=1e-4, rtol=1e-4)
    block_cycles, ops = driver.last_launch().cycles, _ops()
    wanted, unwanted = (
        (Op.RED_ACCUMULATE, Op.DMA_ATOMIC) if red_accumulate else (Op.DMA_ATOMIC, Op.RED_ACCUMULATE)
    )
    assert ops[wanted] == triton.cdiv(R, 16) and ops[unwanted] == 0, ops
    total = torch.zeros(1)
    total_kernel[(triton.cdiv(R * C, 128),)](x, total, R * C, BLOCK=128, red_accumulate=red_accumulate)
    torch.testing.assert_close(total, x.sum().reshape(1), atol=1e-3, rtol=1e-4)
    ops = _ops()
    assert ops[wanted] == triton.cdiv(R * C, 128) and ops[unwanted] == 0, ops
    assert block_cycles > 0


def test_grid_wide_column_sum_is_faster_with_red_accumulate() -> None:
    x = torch.randn(300, 50)
    cycles = {}
    for flag in (True, False):
        out = torch.zeros(50)
        colsum_kernel[(19,)](x, out, 300, 50, BR=16, BC=64, red_accumulate=flag)
        cycles[flag] = driver.last_launch().cycles
    assert cycles[True] < cycles[False], cycles


@triton.jit
def int_ops_kernel(x_ptr, mx_ptr, mn_ptr, xo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n + offs, mask=offs < n, other=0)
    tl.atomic_max(mx_ptr + offs, x, mask=offs < n)
    tl.atomic_min(mn_ptr + offs, x, mask=offs < n)
    tl.atomic_xor(xo_ptr + offs, x, mask=offs < n)


def test_integer_max_min_xor_blocks() -> None:
    torch.manual_seed(2)
    P, n = 12, 20
    x = torch.randint(-1000, 1000, (P, n), dtype=torch.int32)
    mx = torch.full((n,), -(2**31), dtype=torch.int32)
    mn = torch.full((n,), 2**31 - 1, dtype=torch.int32)
    xo = torch.zeros(n, dtype=torch.int32)
    int_ops_kernel[(P,)](x, mx, mn, xo, n, BLOCK=32)
    assert _ops()[Op.RED_ACCUMULATE] == 3 * P and _ops()[Op.DMA_ATOMIC] == 0
    assert torch.equal(mx, x.amax(0)) and torch.equal(mn, x.amin(0))
    ref = torch.zeros(n, dtype=torch.int32)
    for row in x:
        ref ^= row
    assert torch.equal(xo, ref)


@triton.jit
def fmax_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_max(out_ptr + offs, tl.load(x_ptr + tl.program_id(0) * n + offs, mask=offs < n), mask=offs < n)


def test_float_max_keeps_dma_atomic_and_its_nan_semantics() -> None:
    """Triton's frontend splits a float atomic_max into i32 max / u32 umin with value-dependent
    masks (not a box): the DMA_ATOMIC path stays, whatever `red_accumulate` says."""
    x = torch.randn(6, 8)
    x[2, 3] = float("nan")
    outs = []
    for flag in (True, False):
        out = torch.full((8,), -float("inf"))
        fmax_kernel[(6,)](x, out, 8, BLOCK=8, red_accumulate=flag)
        assert _ops()[Op.DMA_ATOMIC] == 12 and _ops()[Op.RED_ACCUMULATE] == 0
        outs.append(out)
    assert torch.equal(outs[0].isnan(), outs[1].isnan()) and bool(outs[0][3].isnan())
    keep = ~outs[1].isnan()
    assert torch.equal(outs[0][keep], outs[1][keep])
    torch.testing.assert_close(outs[0][keep], x.amax(0)[keep])


@triton.jit
def used_and_gathered_kernel(x_ptr, idx_ptr, out_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    old = tl.atomic_add(out_ptr + offs, x, mask=offs < n)  # result used: keeps DMA_ATOMIC
    tl.store(old_ptr + offs, old, mask=offs < n)
    idx = tl.load(idx_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(out_ptr + idx, x, mask=offs < n)  # indirect pointers: keeps DMA_ATOMIC
    tl.atomic_add(out_ptr + offs, x, mask=(offs % 2) == 0)  # mask not a box: keeps DMA_ATOMIC


def test_used_results_indirect_pointers_and_non_box_masks_keep_dma_atomic() -> None:
    n = 10
    x = torch.arange(n, dtype=torch.float32)
    idx = torch.tensor([3, 3, 0, 1, 9, 9, 9, 2, 5, 4])
    out, old = torch.ones(n), torch.zeros(n)
    used_and_gathered_kernel[(1,)](x, idx, out, old, n, BLOCK=16)
    ops = _ops()
    assert ops[Op.DMA_ATOMIC] == 3 and ops[Op.RED_ACCUMULATE] == 0, ops
    ref = torch.ones(n) + x
    ref.index_add_(0, idx, x)
    ref[::2] += x[::2]
    torch.testing.assert_close(old, torch.ones(n))
    torch.testing.assert_close(out, ref)


def test_red_accumulate_is_a_search_option() -> None:
    assert search_space()["red_accumulate"] == (True, False)
    assert MtiaOptions().red_accumulate and MtiaOptions(red_accumulate=False).hash() != MtiaOptions().hash()


def test_tile_listing_names_the_reduction_network() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig: dict[str, Any] = {"x_ptr": "*fp32", "out_ptr": "*fp32", "R": "i32", "C": "i32"}
    src = ASTSource(colsum_kernel, sig, constexprs={"BR": 16, "BC": 64})
    listing = triton.compile(src, target=GPUTarget("mtia", "2i", 1)).asm["tile"]
    line = next(ln for ln in listing.splitlines() if "tt.atomic_rmw ->" in ln)
    assert "RED(accumulate)" in line and "valid=[min(%C)]" in line, line
