import torch
import torch.nn as nn
import triton
import triton.language as tl
ROWS_PER_PROGRAM = 64

@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr, total_rows, ROWS_PER: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    first_row = tl.program_id(0) * ROWS_PER
    row_hi = tl.minimum(first_row + ROWS_PER, total_rows)
    out_prev = tl.zeros((y_ptr + first_row * row_stride + cols).shape, dtype=(y_ptr + first_row * row_stride + cols).dtype.element_ty)
    x_cur = tl.load(x_ptr + first_row * row_stride + cols, mask=mask & (first_row < row_hi), other=float('-inf'))
    for row in tl.range(first_row, row_hi, num_stages=2):
        x_next = tl.load(x_ptr + (row + 1) * row_stride + cols, mask=mask & (row + 1 < row_hi), other=float('-inf'))
        tl.store(y_ptr + (row - 1) * row_stride + cols, out_prev, mask=mask & (row > first_row))
        x = x_cur
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        out_prev = (e / tl.sum(e, axis=0)).to((y_ptr + row * row_stride + cols).dtype.element_ty)
        x_cur = x_next
    tl.store(y_ptr + (row_hi - 1) * row_stride + cols, out_prev, mask=mask & (row_hi > first_row))

class ModelNew(nn.Module):

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        y = torch.empty_like(x2)
        softmax_kernel[triton.cdiv(x2.shape[0], ROWS_PER_PROGRAM),](x2, y, x2.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols), total_rows=x2.shape[0], ROWS_PER=ROWS_PER_PROGRAM)
        return y.view(x.shape)
