"""Seed: one program per (segment, 16 padded rows); copies the rows the segment has, writes zeros after."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def jagged_to_padded_kernel(v_ptr, off_ptr, y_ptr, dim, max_len, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    seg = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    start = tl.load(off_ptr + seg)
    length = tl.load(off_ptr + seg + 1) - start
    cmask = cols[None, :] < dim
    x = tl.load(v_ptr + (start + rows)[:, None] * dim + cols[None, :], mask=(rows[:, None] < length) & cmask, other=0.0)
    tl.store(y_ptr + (seg * max_len + rows)[:, None] * dim + cols[None, :], x, mask=(rows[:, None] < max_len) & cmask)

class ModelNew(nn.Module):

    def __init__(self, max_len):
        super().__init__()
        self.max_len = max_len

    def forward(self, values, offsets):
        num_segments = offsets.numel() - 1
        dim = values.shape[1]
        y = torch.empty((num_segments, self.max_len, dim), dtype=values.dtype)
        grid = (num_segments, triton.cdiv(self.max_len, 256))
        jagged_to_padded_kernel[grid](values, offsets, y, dim, self.max_len, BLOCK_R=256, BLOCK_D=triton.next_power_of_2(dim), num_stages=2, dual_core=True)
        return y
