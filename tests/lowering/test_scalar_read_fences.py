"""A scalar the core reads from the local store (a reduction's result used as an address) fences
only the units whose commands write it (CommandIssuer.read_scalar / resolve_fences): a load still in
flight on the DMA engine, whose result the scalar does not depend on, does not hold the core."""

from __future__ import annotations

import re

import torch
import triton
import triton.language as tl

from lowering.backend import driver
from mtia_sim.isa import MMIO_BASE, Op, Reg, UnitMask


@triton.jit
def pick_row_kernel(w_ptr, off_ptr, y_ptr, n, PREFETCH: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    if PREFETCH:  # a large load nobody reads (a prefetch): it keeps the DMA engine busy
        rows = tl.arange(0, 64)
        tl.load(w_ptr + (rows + 64)[:, None] * BLOCK + cols[None, :], volatile=True)
    offs = tl.load(off_ptr + tl.arange(0, 16))
    k = tl.sum((offs < n).to(tl.int32))  # a scalar from a reduction, read by the core as an address
    row = tl.load(w_ptr + k * BLOCK + cols)
    tl.store(y_ptr + cols, row)


def _fence_masks(llir: str) -> list[int]:
    """The unit masks of the kernel's fences (volatile stores to the FENCE register)."""
    pattern = rf"store volatile i64 (\d+), ptr inttoptr \(i64 {MMIO_BASE + Reg.FENCE} to ptr\)"
    return [int(m) for m in re.findall(pattern, llir)]


def _compile(prefetch: bool) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"w_ptr": "*fp32", "off_ptr": "*i64", "y_ptr": "*fp32", "n": "i32"}
    src = ASTSource(pick_row_kernel, sig, {"PREFETCH": prefetch, "BLOCK": 128})
    return triton.compile(src, target=GPUTarget("mtia", "2i", 1)).asm["llir"]


def test_the_read_of_a_reduction_fences_the_units_that_write_it_not_the_dma() -> None:
    masks = _fence_masks(_compile(prefetch=True))
    assert masks, "the address from the reduction is read by the core behind a fence"
    for mask in masks:
        assert not mask & UnitMask.DMA, f"fence {mask:#x} waits for the DMA engine (the prefetch)"
        assert mask & (UnitMask.RED | UnitMask.SIMD), f"fence {mask:#x} does not wait for the reduction"


def test_the_result_is_exact_and_the_core_does_not_wait_for_the_prefetch() -> None:
    w = torch.randn(128, 128)
    off = torch.arange(16, dtype=torch.int64) * 3
    for prefetch in (False, True):
        y = torch.empty(128)
        pick_row_kernel[(1,)](w, off, y, 20, PREFETCH=prefetch, BLOCK=128)
        torch.testing.assert_close(y, w[int((off < 20).sum())], rtol=0, atol=0)
    timing = driver.last_launch().timing
    records = sorted(timing.commands, key=lambda r: r.issue)
    dma = [r for r in records if r.event.op in (Op.DMA_COPY, Op.DMA_GATHER)]
    prefetch_end = max(r.end for r in dma[:1])  # the prefetch is the first DMA command issued
    picked = [r for r in dma[1:] if r.issue > dma[1].issue]  # the row load after the scalar read
    assert picked and picked[0].issue < prefetch_end, "the core waited for the prefetch before the row load"
