"""A child of the softmax seed that fixes its idle PEs: row statistics split over SPLIT programs per
row (partial max and sum of exp), so both kernels have rows x SPLIT programs for the 64 PEs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SPLIT = 4
BLOCK_SIZE = 128


@triton.jit
def partial_stats_kernel(x_ptr, pmax_ptr, psum_ptr, row_stride, n_cols, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    part = tl.program_id(1)
    cols = part * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=float('-inf'))
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp(x - m), axis=0)
    tl.store(pmax_ptr + row * SPLIT + part, m)
    tl.store(psum_ptr + row * SPLIT + part, s)


@triton.jit
def normalize_kernel(x_ptr, y_ptr, pmax_ptr, psum_ptr, row_stride, n_cols, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    parts = tl.arange(0, SPLIT)
    pm = tl.load(pmax_ptr + row * SPLIT + parts)
    ps = tl.load(psum_ptr + row * SPLIT + parts)
    m = tl.max(pm, axis=0)
    s = tl.sum(ps * tl.exp(pm - m), axis=0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_stride + cols, tl.exp(x - m) / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        n_rows = x2.shape[0]
        y = torch.empty_like(x2)
        pmax = torch.empty(n_rows * SPLIT, dtype=torch.float32, device=x.device)
        psum = torch.empty(n_rows * SPLIT, dtype=torch.float32, device=x.device)
        grid = (n_rows, SPLIT)
        partial_stats_kernel[grid](x2, pmax, psum, x2.stride(0), n_cols, SPLIT=SPLIT, BLOCK=BLOCK_SIZE)
        normalize_kernel[grid](x2, y, pmax, psum, x2.stride(0), n_cols, SPLIT=SPLIT, BLOCK=BLOCK_SIZE)
        return y.view(x.shape)
