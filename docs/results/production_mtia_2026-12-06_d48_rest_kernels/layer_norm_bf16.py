"""Seed: one program per row; a statistics pass and a normalize pass in chunks of 512, float32 math."""
import torch
import torch.nn as nn
import triton
import triton.language as tl
ROWS_PER_PROGRAM = 16

@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK: tl.constexpr, total_rows, ROWS_PER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    start = 0
    mask = start + offs < n_cols
    w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
    first_row = tl.program_id(0) * ROWS_PER
    row_hi = tl.minimum(first_row + ROWS_PER, total_rows)
    out_prev = tl.zeros((y_ptr + first_row * stride_y + start + offs).shape, dtype=(y_ptr + first_row * stride_y + start + offs).dtype.element_ty)
    x_cur = tl.load(x_ptr + first_row * stride_x + start + offs, mask=mask & (first_row < row_hi), other=0.0)
    for row in tl.range(first_row, row_hi, num_stages=2):
        x_next = tl.load(x_ptr + (row + 1) * stride_x + start + offs, mask=mask & (row + 1 < row_hi), other=0.0)
        tl.store(y_ptr + (row - 1) * stride_y + start + offs, out_prev, mask=mask & (row > first_row))
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        acc_sq = tl.zeros((BLOCK,), dtype=tl.float32)
        x = x_cur.to(tl.float32)
        acc += x
        acc_sq += x * x
        mean = tl.sum(acc, axis=0) / n_cols
        var = tl.sum(acc_sq, axis=0) / n_cols - mean * mean
        rstd = 1.0 / tl.sqrt(var + eps)
        y = (x - mean) * rstd * w + b
        out_prev = y.to(y_ptr.dtype.element_ty)
        x_cur = x_next
    tl.store(y_ptr + (row_hi - 1) * stride_y + start + offs, out_prev, mask=mask & (row_hi > first_row))

class ModelNew(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        rows, cols = x.shape
        y = torch.empty_like(x)
        layer_norm_kernel[triton.cdiv(rows, ROWS_PER_PROGRAM),](x, weight, bias, y, cols, x.stride(0), y.stride(0), 1e-05, BLOCK=triton.next_power_of_2(cols), total_rows=rows, ROWS_PER=ROWS_PER_PROGRAM)
        return y
