"""Seed candidate: a two-kernel row softmax (row statistics, then a 2-D normalise grid) with small blocks; the search should find the one-block-per-row form and better sizes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

STATS_BLOCK_SIZE = 32
NORM_BLOCK_SIZE = 32


@triton.jit
def row_stats_kernel(x_ptr, max_ptr, sum_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    m = tl.full([BLOCK], float('-inf'), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float('-inf'))
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float('-inf'))
        s += tl.exp(x - row_max)
    tl.store(max_ptr + row, row_max)
    tl.store(sum_ptr + row, tl.sum(s, axis=0))


@triton.jit
def normalize_kernel(x_ptr, y_ptr, max_ptr, sum_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    y = tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row)
    tl.store(y_ptr + row * row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        row_max = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        row_sum = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        row_stats_kernel[(n_rows,)](x2, row_max, row_sum, x2.stride(0), n_cols, BLOCK=STATS_BLOCK_SIZE)
        grid = (n_rows, triton.cdiv(n_cols, NORM_BLOCK_SIZE))
        normalize_kernel[grid](x2, y, row_max, row_sum, x2.stride(0), n_cols, BLOCK=NORM_BLOCK_SIZE)
        return y.view(x.shape)
