"""Seed: a row kernel computes dx and the per-row terms of dweight; a column kernel sums them."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_bwd_dx_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, part_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc_sq = tl.zeros((BLOCK,), dtype=tl.float32)
    acc_dot = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + row * stride + start + offs, mask=mask, other=0.0)
        acc_sq += x * x
        acc_dot += dy * w * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc_sq, axis=0) / n_cols + eps)
    coef = tl.sum(acc_dot, axis=0) * rstd * rstd * rstd / n_cols
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        x = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + row * stride + start + offs, mask=mask, other=0.0)
        tl.store(dx_ptr + row * stride + start + offs, dy * w * rstd - x * coef, mask=mask)
        tl.store(part_ptr + row * stride + start + offs, dy * x * rstd, mask=mask)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, n_rows, n_cols, stride,
                      BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, n_rows, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(part_ptr + r[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, dy):
        rows, cols = x.shape
        dx = torch.empty_like(x)
        part = torch.empty_like(x)
        dw = torch.empty_like(weight)
        rms_norm_bwd_dx_kernel[(rows,)](x, weight, dy, dx, part, cols, x.stride(0), 1e-6, BLOCK=128)
        column_sum_kernel[(triton.cdiv(cols, 64),)](part, dw, rows, cols, part.stride(0),
                                                    BLOCK_R=16, BLOCK_C=64)
        return dx, dw
