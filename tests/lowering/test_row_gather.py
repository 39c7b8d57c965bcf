"""Row gathers (issue 26): loads of indirect rows with contiguous columns become one DMA_GATHER of
GatherForm.ROWS with one address per row; they run on the simulator and match PyTorch."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from lowering.backend import driver


@triton.jit
def rows_kernel(w_ptr, idx_ptr, y_ptr, n_idx, dim, stride, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """y[i, :dim] = w[idx[i], :dim]; masked rows and ragged columns read `other`."""
    pos = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    pmask = pos < n_idx
    rows = tl.load(idx_ptr + pos, mask=pmask, other=0)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < dim
    vals = tl.load(
        w_ptr + (rows * stride)[:, None] + cols[None, :], mask=pmask[:, None] & cmask[None, :], other=-3.0
    )
    tl.store(y_ptr + pos[:, None] * BLOCK_D + cols[None, :], vals)


@triton.jit
def row_cond_kernel(w_ptr, idx_ptr, y_ptr, dim, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """A row condition computed from loaded values (negative ids are skipped) and a column bound."""
    pos = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rows = tl.load(idx_ptr + pos)
    cols = tl.arange(0, BLOCK_D)
    keep = rows >= 0
    ptrs = w_ptr + rows[:, None] * dim + cols[None, :]
    vals = tl.load(ptrs, mask=keep[:, None] & (cols[None, :] < dim), other=0.0)
    tl.store(y_ptr + pos[:, None] * BLOCK_D + cols[None, :], vals)


@triton.jit
def row_offset_kernel(w_ptr, idx_ptr, y_ptr, col0, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """No mask; a column offset; the pointer built as (w + rows[:, None] * 2 * BLOCK_D) + cols."""
    pos = tl.arange(0, ROWS)
    rows = tl.load(idx_ptr + pos)
    cols = col0 + tl.arange(0, BLOCK_D)
    vals = tl.load(w_ptr + rows[:, None] * (2 * BLOCK_D) + cols[None, :])
    tl.store(y_ptr + pos[:, None] * BLOCK_D + tl.arange(0, BLOCK_D)[None, :], vals * 2)


def _reference(
    w: torch.Tensor, idx: torch.Tensor, n: int, dim: int, block: int, other: float
) -> torch.Tensor:
    ref = torch.full((idx.numel(), block), other, dtype=w.dtype)
    ref[:n, :dim] = w[idx[:n].long(), :dim]
    return ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("n_dim", [(29, 24), (32, 32), (5, 7)])
def test_row_gather_matches_torch(dtype: torch.dtype, idx_dtype: torch.dtype, n_dim: tuple[int, int]) -> None:
    n, dim = n_dim
    rows, block = 16, triton.next_power_of_2(dim)
    g = torch.Generator().manual_seed(n * 100 + dim)
    stride = dim + 3  # rows of the table are not the tile's width
    w = torch.randn(50, stride, generator=g).to(dtype)
    idx = torch.randint(0, 50, (triton.cdiv(n, rows) * rows,), generator=g).to(idx_dtype)
    idx[1] = idx[0]  # duplicates
    y = torch.full((idx.numel(), block), 99.0, dtype=dtype)
    rows_kernel[(triton.cdiv(n, rows),)](w, idx, y, n, dim, stride, ROWS=rows, BLOCK_D=block)
    torch.testing.assert_close(y, _reference(w, idx, n, dim, block, -3.0), rtol=0, atol=0)


def test_row_mask_from_loaded_values() -> None:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(40, 12, generator=g)
    idx = torch.randint(-5, 40, (32,), generator=g, dtype=torch.int32)
    y = torch.empty(32, 16)
    row_cond_kernel[(2,)](w, idx, y, 12, ROWS=16, BLOCK_D=16)
    ref = torch.zeros(32, 16)
    keep = idx >= 0
    ref[keep, :12] = w[idx[keep].long()]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


def test_row_gather_without_mask_and_column_offset() -> None:
    g = torch.Generator().manual_seed(2)
    w = torch.randn(30, 32, generator=g).half()
    idx = torch.randint(0, 30, (8,), generator=g)
    y = torch.empty(8, 16, dtype=torch.float16)
    row_offset_kernel[(1,)](w, idx, y, 5, ROWS=8, BLOCK_D=16)
    torch.testing.assert_close(y, w[idx, 5:21] * 2, rtol=0, atol=0)


def test_out_of_range_row_faults() -> None:
    w = torch.randn(4, 8)
    idx = torch.tensor([0, 1, 2, 1 << 40] * 2, dtype=torch.int64)
    y = torch.empty(8, 8)
    with pytest.raises(Exception, match="outside every memory|MemoryFault"):
        rows_kernel[(1,)](w, idx, y, 8, 8, 8, ROWS=8, BLOCK_D=8)


MTIA = GPUTarget("mtia", "2i", 1)
SIG = {"w_ptr": "*fp16", "idx_ptr": "*i32", "y_ptr": "*fp16", "n_idx": "i32", "dim": "i32", "stride": "i32"}


def _tile_listing(fn: triton.JITFunction, sig: dict[str, str], consts: dict[str, int]) -> list[str]:
    src = ASTSource(fn, {**sig, **{k: "constexpr" for k in consts}}, consts)
    with knobs.compilation.scope():
        knobs.compilation.always_compile = True
        kernel = triton.compile(src, target=MTIA)
    return [line for line in kernel.asm["tile"].splitlines() if line.startswith("//")]


def test_row_form_is_chosen() -> None:
    """The listing names the row gather with its box; the SIMD unit computes one address per row."""
    lines = _tile_listing(rows_kernel, SIG, {"ROWS": 16, "BLOCK_D": 32})
    assert any("tt.load -> DMA(row gather) rows base=%w_ptr" in x and "valid=[min(" in x for x in lines)
    assert not any("DMA(gather)" in x for x in lines)
    sig = {"w_ptr": "*fp32", "idx_ptr": "*i64", "y_ptr": "*fp32", "dim": "i32"}
    lines = _tile_listing(row_cond_kernel, sig, {"ROWS": 16, "BLOCK_D": 32})
    assert any("DMA(row gather)" in x and "row_mask=" in x and "valid=[-, min(%dim)]" in x for x in lines)
    w, idx, y = (
        torch.randn(64, 32).half(),
        torch.randint(0, 64, (64,), dtype=torch.int32),
        torch.empty(64, 32).half(),
    )
    rows_kernel[(1,)](w, idx, y, 64, 32, 32, ROWS=64, BLOCK_D=32)
    simd = driver.last_launch().counters.totals["SIMD"]
    assert simd.elements < 64 * 32 // 4  # a [64, 32] address tile would be 2048 elements per command


@triton.jit
def gather_2d_kernel(w_ptr, idx_ptr, y_ptr, BLOCK: tl.constexpr):
    """Indices in both dims: stays a per-element gather."""
    offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
    idx = tl.load(idx_ptr + offs)
    tl.store(y_ptr + offs, tl.load(w_ptr + idx))


def test_element_gather_stays() -> None:
    lines = _tile_listing(
        gather_2d_kernel, {"w_ptr": "*fp32", "idx_ptr": "*i32", "y_ptr": "*fp32"}, {"BLOCK": 8}
    )
    assert any("tt.load -> DMA(gather)" in x for x in lines)
    w, idx = torch.randn(100), torch.randint(0, 100, (8, 8), dtype=torch.int32)
    y = torch.empty(8, 8)
    gather_2d_kernel[(1,)](w, idx, y, BLOCK=8)
    torch.testing.assert_close(y, w[idx.long()], rtol=0, atol=0)


@triton.jit
def tensor_mask_kernel(w_ptr, idx_ptr, y_ptr, dim, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """A mask that is neither a box nor per row: the row gather reads the whole mask tensor."""
    pos = tl.arange(0, ROWS)
    rows = tl.load(idx_ptr + pos)
    cols = tl.arange(0, BLOCK_D)
    keep = (rows[:, None] + cols[None, :]) % 3 != 0
    vals = tl.load(w_ptr + rows[:, None] * dim + cols[None, :], mask=keep, other=7.0)
    tl.store(y_ptr + pos[:, None] * BLOCK_D + cols[None, :], vals)


def test_row_gather_with_a_tensor_mask() -> None:
    sig = {"w_ptr": "*fp32", "idx_ptr": "*i32", "y_ptr": "*fp32", "dim": "i32"}
    lines = _tile_listing(tensor_mask_kernel, sig, {"ROWS": 8, "BLOCK_D": 16})
    assert any("DMA(row gather)" in x and "mask=tensor" in x for x in lines)
    g = torch.Generator().manual_seed(3)
    w = torch.randn(20, 16, generator=g)
    idx = torch.randint(0, 20, (8,), generator=g, dtype=torch.int32)
    y = torch.empty(8, 16)
    tensor_mask_kernel[(1,)](w, idx, y, 16, ROWS=8, BLOCK_D=16)
    keep = (idx[:, None].long() + torch.arange(16)[None, :]) % 3 != 0
    torch.testing.assert_close(y, torch.where(keep, w[idx.long()], torch.tensor(7.0)), rtol=0, atol=0)


@triton.jit
def loop_kernel(idx_ptr, w_ptr, y_ptr, n_idx, dim, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    """Indices loaded once before a column loop: the row tensor lives across the loop's gathers."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_idx
    idx = tl.load(idx_ptr + rows, mask=row_mask, other=0)
    for d in range(0, dim, BLOCK_D):
        cols = d + tl.arange(0, BLOCK_D)
        mask = row_mask[:, None] & (cols[None, :] < dim)
        vals = tl.load(w_ptr + idx[:, None] * dim + cols[None, :], mask=mask, other=0.0)
        tl.store(y_ptr + rows[:, None] * dim + cols[None, :], vals + 1, mask=mask)


def test_row_gather_in_a_loop() -> None:
    g = torch.Generator().manual_seed(4)
    w = torch.randn(33, 40, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, 33, (21,), generator=g)
    y = torch.zeros(21, 40, dtype=torch.bfloat16)
    loop_kernel[(3,)](idx, w, y, 21, 40, ROWS=8, BLOCK_D=16)
    torch.testing.assert_close(y, w[idx] + 1, rtol=0, atol=0)
