"""Seed: one program per 32 columns, loop over rows in tiles of 16."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def col_mean_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, n_rows, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + r[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + cols, tl.sum(acc, axis=0) / n_rows, mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty((cols,), dtype=x.dtype)
        col_mean_kernel[(triton.cdiv(cols, 32),)](x, y, rows, cols, x.stride(0), BLOCK_R=16, BLOCK_C=32)
        return y
