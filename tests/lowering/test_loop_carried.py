"""Loop-carried tensors are updated as one parallel copy: a yielded value that the loop body computed
in place in another carried value's slot (its buffer reused when that value died) is read before that
slot is overwritten. Before the fix, a software-pipelined row loop stored the next input row instead
of its output (the prefetched row was copied over the output's slot first)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def swap_kernel(x_ptr, y_ptr, iters, N: tl.constexpr):
    cols = tl.arange(0, N)
    a = tl.load(x_ptr + cols)
    b = tl.load(x_ptr + N + cols)
    for _ in range(iters):
        a, b = b, a + 1.0
    tl.store(y_ptr + cols, a)
    tl.store(y_ptr + N + cols, b)


@triton.jit
def deferred_store_kernel(x_ptr, y_ptr, rows, N: tl.constexpr):
    """Row r's output is stored in iteration r + 1, after row r + 1's load is issued."""
    cols = tl.arange(0, N)
    nxt = tl.load(x_ptr + cols)
    out = tl.zeros([N], tl.float32)
    for r in range(rows):
        cur = nxt
        nxt = tl.load(x_ptr + ((r + 1) % rows) * N + cols)
        if r > 0:
            tl.store(y_ptr + (r - 1) * N + cols, out)
        out = cur * 2.0 + 1.0
    tl.store(y_ptr + (rows - 1) * N + cols, out)


def test_swapped_carried_tensors() -> None:
    x = torch.randn(2, 32)
    for iters in (0, 1, 2, 3):
        y = torch.empty(2, 32)
        swap_kernel[(1,)](x, y, iters, N=32)
        a, b = x[0], x[1]
        for _ in range(iters):
            a, b = b, a + 1.0
        torch.testing.assert_close(y, torch.stack([a, b]), rtol=0, atol=0)


def test_deferred_store_of_a_value_computed_in_a_dead_slot() -> None:
    x = torch.randn(5, 64)
    y = torch.zeros(5, 64)
    deferred_store_kernel[(1,)](x, y, 5, N=64)
    torch.testing.assert_close(y, x * 2.0 + 1.0, rtol=0, atol=0)
