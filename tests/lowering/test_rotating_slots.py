"""Rotating slots for loop-carried tensors computed one iteration ahead (docs/DECISIONS.md D38).

A carried tensor whose next value is computed while the current one is still read later in the body
gets two halves: the current value in half `iteration % 2`, the next one computed straight into the
other half, and no copy at the yield. Checked exactly against PyTorch on the simulator for trip
counts 0-5 (the value after the loop sits in either half, or in half 0 when the loop never ran),
with another carried value that takes the current one over (read from the half being replaced
later), and in the compiled kernel's local-store layout.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from lowering.codegen.local_alloc import LocalStoreAllocator
from lowering.errors import LocalStoreOverflowError


@triton.jit
def ahead_kernel(x_ptr, y_ptr, rows, N: tl.constexpr):
    """Row r + 1 is loaded and scaled before row r is used: `cur` is carried, `nxt` computed ahead."""
    cols = tl.arange(0, N)
    cur = tl.load(x_ptr + cols) * 2.0
    acc = tl.zeros([N], tl.float32)
    prev = tl.zeros([N], tl.float32)
    for r in range(rows):
        nxt = tl.load(x_ptr + ((r + 1) % rows) * N + cols) * 2.0
        acc = acc + cur * (r + 1)
        tl.store(y_ptr + r * N + cols, cur + prev)
        prev = cur
        cur = nxt
    tl.store(y_ptr + rows * N + cols, acc)
    tl.store(y_ptr + (rows + 1) * N + cols, cur)
    tl.store(y_ptr + (rows + 2) * N + cols, prev)


def _expected(x: torch.Tensor, rows: int) -> torch.Tensor:
    n = x.shape[1]
    out = torch.zeros(rows + 3, n)
    cur = x[0] * 2.0
    acc = torch.zeros(n)
    prev = torch.zeros(n)
    for r in range(rows):
        nxt = x[(r + 1) % rows] * 2.0
        acc = acc + cur * (r + 1)
        out[r] = cur + prev
        prev, cur = cur, nxt
    out[rows], out[rows + 1], out[rows + 2] = acc, cur, prev
    return out


@pytest.mark.parametrize("rows", [0, 1, 2, 3, 5])
def test_a_value_computed_ahead_is_carried_exactly(rows: int) -> None:
    x = torch.randn(max(rows, 1), 64)
    y = torch.zeros(rows + 3, 64)
    ahead_kernel[(1,)](x, y, rows, N=64)
    torch.testing.assert_close(y, _expected(x, rows), rtol=0, atol=0)


def test_the_carried_value_gets_two_halves_and_no_copy() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(ahead_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "rows": "i32", "N": "constexpr"}, {"N": 64})
    k = triton.compile(src, target=GPUTarget("mtia", "2i", 1))
    head = k.asm["llir"].split("; ModuleID", 1)[0]
    assert "rotating %cur" in head and "x2" in head
    assert "iter %cur" not in head  # no single slot (and so no copy into it) for the value computed ahead


def test_next_fit_spreads_buffers_and_falls_back_to_the_lowest_free_range() -> None:
    a = LocalStoreAllocator(4096, next_fit=True)
    x = a.allocate(1024, "x")
    a.release(x)
    y = a.allocate(1024, "y")
    assert y.offset == 1024  # not x's freed range: the next command need not wait for x's readers
    z = a.allocate(2048, "z")
    assert z.offset == 2048
    w = a.allocate(1024, "w")  # nothing free after the cursor: wraps to the lowest free range
    assert w.offset == 0
    with pytest.raises(LocalStoreOverflowError):
        a.allocate(1024, "v")
    first = LocalStoreAllocator(4096)
    first.release(first.allocate(1024, "x"))
    assert first.allocate(1024, "y").offset == 0  # the compact (first-fit) placement reuses at once
