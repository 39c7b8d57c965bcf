"""Seed: one program per row, chunks of 128; keeps the first index of the running maximum."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, y_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    best_val = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    best_idx = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * stride_x + start + offs, mask=start + offs < n_cols, other=float("-inf"))
        better = x > best_val
        best_idx = tl.where(better, start + offs, best_idx)
        best_val = tl.where(better, x, best_val)
    row_max = tl.max(best_val, axis=0)
    cand = tl.where(best_val == row_max, best_idx, n_cols)
    tl.store(y_ptr + row, tl.min(cand, axis=0).to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty((rows,), dtype=torch.int64)
        argmax_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=128)
        return y
