"""A candidate whose row carry is a [ROWS] vector fed by `carry += tl.sum(x, axis=1)` in the loop: exact
in Triton's interpreter and on the simulator, rejected by Triton's NVIDIA pipeline (Triton 3.6-3.7,
TritonGPUOptimizeThreadLocality; an H100 reported `PassManager::run failed`, 2026-12-07)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, row_stride, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = tl.arange(0, BLOCK)
    carry = tl.zeros([ROWS], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = (rows < n_rows)[:, None] & (start + offs < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * row_stride + (start + offs)[None, :], mask=mask, other=0.0)
        scan = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(y_ptr + rows[:, None] * n_cols + (start + offs)[None, :], scan, mask=mask)
        carry += tl.sum(x, axis=1)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        cumsum_kernel[(triton.cdiv(x.shape[0], 8),)](x, y, x.stride(0), x.shape[0], x.shape[1], ROWS=8, BLOCK=1024)
        return y
