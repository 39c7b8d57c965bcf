"""Seed: one program per row; the residual add is recomputed in a mean pass, a variance pass (centered,
so rows with a large offset keep their precision) and a normalize pass."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_layer_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        h = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0) \
            + tl.load(r_ptr + row * stride + start + offs, mask=mask, other=0.0)
        acc += h
    mean = tl.sum(acc, axis=0) / n_cols
    acc_sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        h = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0) \
            + tl.load(r_ptr + row * stride + start + offs, mask=mask, other=0.0)
        d = tl.where(mask, h - mean, 0.0)
        acc_sq += d * d
    var = tl.sum(acc_sq, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK):
        mask = start + offs < n_cols
        h = tl.load(x_ptr + row * stride + start + offs, mask=mask, other=0.0) \
            + tl.load(r_ptr + row * stride + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + start + offs, (h - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, residual, weight, bias):
        x, residual = x.contiguous(), residual.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        add_layer_norm_kernel[(rows,)](x, residual, weight, bias, y, cols, x.stride(0), 1e-5, BLOCK=128)
        return y
