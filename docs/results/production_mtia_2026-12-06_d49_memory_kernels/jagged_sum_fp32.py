"""Seed: one program per segment; adds one row per step of a loop over the segment's offsets."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def jagged_sum_kernel(v_ptr, off_ptr, y_ptr, dim, BLOCK_D: tl.constexpr, R: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(off_ptr + seg)
    end = tl.load(off_ptr + seg + 1)
    cols = tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for r_blk in range(start, end, R):
        r = r_blk + tl.arange(0, R)[:, None]
        r_mask = r < end
        acc += tl.sum(tl.where(r_mask, tl.load(v_ptr + r * dim + cols, mask=(cols < dim) & r_mask, other=0.0), 0), axis=0)
    tl.store(y_ptr + seg * dim + cols, acc, mask=cols < dim)

class ModelNew(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        num_segments = offsets.numel() - 1
        dim = values.shape[1]
        y = torch.empty((num_segments, dim), dtype=values.dtype)
        jagged_sum_kernel[num_segments,](values, offsets, y, dim, BLOCK_D=triton.next_power_of_2(dim), num_stages=3, R=32)
        return y
