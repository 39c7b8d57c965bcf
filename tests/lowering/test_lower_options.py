"""Performance options change simulated cycles in the expected direction, never the results."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lowering.backend import driver
from lowering.options import MtiaOptions
from lowering.pipeline import search_space


@triton.jit
def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(
            a + rm[:, None] * K + (k + rk)[None, :],
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + (k + rk)[:, None] * N + rn[None, :],
            mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0 + 1.0, mask=m)


def _mm(**options: object) -> tuple[torch.Tensor, float]:
    torch.manual_seed(0)
    M, N, K = 32, 32, 256
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.empty(M, N)
    mm_kernel[(1, 1)](a, b, c, M, N, K, BM=32, BN=32, BK=32, **options)
    return c, driver.last_launch().cycles


def test_num_stages_overlaps_dma_with_compute() -> None:
    c1, cyc1 = _mm(num_stages=1)
    c2, cyc2 = _mm(num_stages=2)
    c3, cyc3 = _mm(num_stages=3)
    torch.testing.assert_close(c1, c2, rtol=0, atol=0)
    torch.testing.assert_close(c1, c3, rtol=0, atol=0)
    assert cyc2 < cyc1, (cyc1, cyc2)
    assert cyc3 <= cyc1


def _scale(**options: object) -> tuple[torch.Tensor, float]:
    n = 64 * 128 * 2
    x = torch.linspace(-1, 1, n)
    y = torch.empty(n)
    scale_kernel[(n // 128,)](x, y, n, BLOCK=128, **options)
    torch.testing.assert_close(y, x * 3 + 1)
    return y, driver.last_launch().cycles


def test_dual_core_uses_both_cores() -> None:
    y1, single = _scale()
    y2, dual = _scale(dual_core=True)
    assert torch.equal(y1, y2)
    assert dual < single, (single, dual)


def test_block_dma_beats_gather_scatter() -> None:
    y1, block = _scale(block_dma=True)
    y2, gather = _scale(block_dma=False)
    assert torch.equal(y1, y2)
    assert block < gather, (block, gather)


def test_tile_size_changes_cycles_not_results() -> None:
    n = 4096
    x = torch.randn(n)
    cycles = {}
    outs = {}
    for block in (64, 256):
        y = torch.empty(n)
        scale_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
        cycles[block], outs[block] = driver.last_launch().cycles, y
    assert torch.equal(outs[64], outs[256])
    assert cycles[64] != cycles[256]


def test_options_hash_and_search_space() -> None:
    a, b = MtiaOptions(num_stages=2), MtiaOptions(num_stages=2)
    assert a.hash() == b.hash() and a.hash() != MtiaOptions(num_stages=3).hash()
    space = search_space()
    assert set(space) >= {"num_stages", "dual_core"}


@triton.jit
def early_exit_kernel(x_ptr, y_ptr, n, active, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= active:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.num_programs(0), mask=m)


def test_blocked_pe_mapping_fewer_programs_same_results() -> None:
    _, round_robin = _scale()
    rr_programs = driver.last_launch().programs
    _, blocked = _scale(pe_mapping="blocked")
    assert driver.last_launch().programs < rr_programs
    assert blocked < round_robin, (round_robin, blocked)


def test_blocked_mapping_with_early_return_and_num_programs() -> None:
    n, block = 200 * 16, 16
    x = torch.randn(n)
    outs = []
    for mapping in ("round_robin", "blocked"):
        y = torch.zeros(n)
        early_exit_kernel[(n // block,)](x, y, n, 150, BLOCK=block, pe_mapping=mapping)
        outs.append(y)
    ref = torch.zeros(n)
    ref[: 150 * block] = x[: 150 * block] + n // block
    torch.testing.assert_close(outs[0], ref)
    torch.testing.assert_close(outs[1], ref)


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for off in range(0, N, BLOCK):  # running max and sum: loop-carried scalars made by the units
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
        tl.store(y_ptr + row * N + cols, tl.exp(x - m) / s, mask=cols < N)


def test_online_softmax_stages_overlap_without_core_stalls() -> None:
    R, N = 3, 300
    x = torch.randn(R, N)
    cycles = []
    for stages in (1, 2):
        y = torch.empty(R, N)
        online_softmax_kernel[(R,)](x, y, N, BLOCK=64, num_stages=stages)
        torch.testing.assert_close(y, torch.softmax(x, 1), atol=1e-5, rtol=1e-4)
        cycles.append(driver.last_launch().cycles)
    assert cycles[1] < cycles[0], cycles
