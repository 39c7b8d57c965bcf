"""dual_core: the two cores of a PE share its local store, so each program gets its own half."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from lowering.backend import driver
from lowering.codegen.errors import LocalStoreOverflowError
from lowering.pipeline import local_store_capacity
from mtia_sim.events import AddrRange, CommandEvent
from mtia_sim.isa import LOCAL_BASE


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.exp(tl.load(x_ptr + offs, mask=m)) * 3.0 + 1.0, mask=m)


@triton.jit
def rowsum_dot_kernel(x_ptr, w_ptr, out_ptr, BLOCK: tl.constexpr):
    """Reductions read back by the core, a dot and a constant table: every local-store address kind."""
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * BLOCK * BLOCK + offs[:, None] * BLOCK + offs[None, :])
    w = tl.load(w_ptr + offs[:, None] * BLOCK + offs[None, :])
    y = tl.dot(x, w)
    s = tl.sum(tl.sum(y, axis=1), axis=0)
    if s > 0:
        y = y * 2.0
    tl.store(out_ptr + r * BLOCK * BLOCK + offs[:, None] * BLOCK + offs[None, :], y)


def _ranges_by_core() -> dict[tuple[int, int], list[AddrRange]]:
    out: dict[tuple[int, int], list[AddrRange]] = {}
    for t in driver.last_launch().traces:
        for e in t.events:
            if isinstance(e, CommandEvent):
                out.setdefault((t.pe, t.core), []).extend(e.reads + e.writes)
    return out


def _assert_cores_disjoint() -> None:
    ranges = _ranges_by_core()
    half = LOCAL_BASE + local_store_capacity("mtia-2i") // 2
    pes_with_two = 0
    for (pe, core), rs in ranges.items():
        assert rs, (pe, core)
        if core == 0:
            assert all(r.end <= half for r in rs), (pe, core)
        else:
            assert all(r.start >= half for r in rs), (pe, core)
        other = ranges.get((pe, 1 - core), [])
        pes_with_two += bool(other)
        assert not any(a.overlaps(b) for a in rs for b in other), pe
    assert pes_with_two >= 2  # both cores of some PEs ran programs


def _scale(n_programs: int, dual_core: bool) -> tuple[torch.Tensor, float]:
    n = n_programs * 128
    x = torch.linspace(-1, 1, n)
    y = torch.empty(n)
    scale_kernel[(n_programs,)](x, y, n, BLOCK=128, dual_core=dual_core)
    torch.testing.assert_close(y, torch.exp(x) * 3 + 1)
    return y, driver.last_launch().cycles


def test_cores_of_one_pe_use_disjoint_local_store_halves() -> None:
    y1, _ = _scale(256, False)
    y2, _ = _scale(256, True)
    assert torch.equal(y1, y2)
    _assert_cores_disjoint()


def test_dot_reductions_and_core_reads_work_on_core_one() -> None:
    torch.manual_seed(0)
    B, R = 16, 130  # 130 programs: both cores of the first PEs
    x, w = torch.randn(R, B, B), torch.randn(B, B)
    outs = []
    for dual in (False, True):
        out = torch.empty(R, B, B)
        rowsum_dot_kernel[(R,)](x, w, out, BLOCK=B, dual_core=dual)
        outs.append(out)
    ref = x @ w
    ref = torch.where(ref.sum((1, 2), keepdim=True) > 0, ref * 2, ref)
    torch.testing.assert_close(outs[0], ref, atol=1e-4, rtol=1e-4)
    assert torch.equal(outs[0], outs[1])
    _assert_cores_disjoint()


def test_dual_core_is_faster_for_many_programs() -> None:
    _, single = _scale(512, False)
    _, dual = _scale(512, True)
    assert dual < 0.8 * single, (single, dual)


@triton.jit
def big_block_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.exp(x) + x)


def test_overflow_reports_the_halved_capacity_and_dual_core() -> None:
    capacity = local_store_capacity("mtia-2i")
    block = 1 << 15  # x and exp(x): 256 KiB, fits the whole store but not half of it
    assert 2 * block * 4 <= capacity < 4 * block * 4
    x, y = torch.randn(block), torch.empty(block)
    big_block_kernel[(1,)](x, y, BLOCK=block)
    torch.testing.assert_close(y, torch.exp(x) + x)
    with pytest.raises(LocalStoreOverflowError) as info:
        big_block_kernel[(1,)](x, y, BLOCK=block, dual_core=True)
    msg = str(info.value)
    assert f"capacity is {capacity // 2} B" in msg
    assert "dual_core" in msg and "half" in msg


@triton.jit
def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):  # loads in the loop rotate through multi-buffer rings
        acc += tl.dot(
            tl.load(a + rm[:, None] * K + (k + rk)[None, :]), tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        )
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def test_multi_buffer_rings_on_core_one() -> None:
    torch.manual_seed(0)
    M, N, K = 144, 144, 128  # 81 programs: core 1 of PEs 0..16 runs the ring-buffered K loop
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.empty(M, N)
    mm_kernel[(9, 9)](a, b, c, M, N, K, BM=16, BN=16, BK=32, num_stages=2, dual_core=True)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    _assert_cores_disjoint()
