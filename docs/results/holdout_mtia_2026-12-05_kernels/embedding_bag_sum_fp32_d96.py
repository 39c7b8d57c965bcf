"""Seed: one program per bag; gathers one table row per step of a loop over the bag's offsets."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def embedding_bag_kernel(w_ptr, idx_ptr, off_ptr, y_ptr, dim, BLOCK_D: tl.constexpr, R: tl.constexpr):
    bag = tl.program_id(0)
    start = tl.load(off_ptr + bag)
    end = tl.load(off_ptr + bag + 1)
    cols = tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i_blk in range(start, end, R):
        i = i_blk + tl.arange(0, R)[:, None]
        i_mask = i < end
        row = tl.load(idx_ptr + i, mask=i_mask, other=0)
        acc += tl.sum(tl.where(i_mask, tl.load(w_ptr + row * dim + cols, mask=(cols < dim) & i_mask, other=0.0).to(tl.float32), 0), axis=0)
    tl.store(y_ptr + bag * dim + cols, acc.to(y_ptr.dtype.element_ty), mask=cols < dim)

class ModelNew(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        num_bags = offsets.numel() - 1
        dim = weight.shape[1]
        y = torch.empty((num_bags, dim), dtype=weight.dtype)
        embedding_bag_kernel[num_bags,](weight, indices, offsets, y, dim, BLOCK_D=triton.next_power_of_2(dim), R=32, dual_core=True)
        return y
