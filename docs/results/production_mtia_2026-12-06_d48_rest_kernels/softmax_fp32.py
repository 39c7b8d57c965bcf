"""Seed: one program per row; three passes (max, sum, write) in chunks of 512."""
import torch
import torch.nn as nn
import triton
import triton.language as tl
ROWS_PER_PROGRAM = 16

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, total_rows, ROWS_PER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    start = 0
    mask = start + offs < n_cols
    first_row = tl.program_id(0) * ROWS_PER
    row_hi = tl.minimum(first_row + ROWS_PER, total_rows)
    out_prev = tl.zeros((y_ptr + first_row * stride_y + start + offs).shape, dtype=(y_ptr + first_row * stride_y + start + offs).dtype.element_ty)
    x_cur = tl.load(x_ptr + first_row * stride_x + start + offs, mask=(start + offs < n_cols) & (first_row < row_hi), other=float('-inf'))
    for row in tl.range(first_row, row_hi, num_stages=2):
        x_next = tl.load(x_ptr + (row + 1) * stride_x + start + offs, mask=(start + offs < n_cols) & (row + 1 < row_hi), other=float('-inf'))
        tl.store(y_ptr + (row - 1) * stride_y + start + offs, out_prev, mask=mask & (row > first_row))
        m = tl.full((BLOCK,), float('-inf'), dtype=tl.float32)
        x = x_cur
        m = tl.maximum(m, x)
        row_max = tl.max(m, axis=0)
        s = tl.zeros((BLOCK,), dtype=tl.float32)
        s += tl.exp(x - row_max)
        denom = tl.sum(s, axis=0)
        out_prev = (tl.exp(x - row_max) / denom).to((y_ptr + row * stride_y + start + offs).dtype.element_ty)
        x_cur = x_next
    tl.store(y_ptr + (row_hi - 1) * stride_y + start + offs, out_prev, mask=mask & (row_hi > first_row))

class ModelNew(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        softmax_kernel[triton.cdiv(rows, ROWS_PER_PROGRAM),](x, y, cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(cols), total_rows=rows, ROWS_PER=ROWS_PER_PROGRAM)
        return y
