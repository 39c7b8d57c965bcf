"""Seed candidate: a fused elementwise kernel with a small block (64 elements per program)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def fused_elementwise_kernel(in0_ptr, in1_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v0 = tl.load(in0_ptr + offs, mask=mask).to(tl.float32)
    v1 = tl.load(in1_ptr + offs, mask=mask).to(tl.float32)
    t0 = (v0 + v1)
    tl.store(out_ptr + offs, t0.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x0, x1):
        x0 = x0.contiguous()
        x1 = x1.contiguous()
        out = torch.empty_like(x0)
        n = out.numel()
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        fused_elementwise_kernel[grid](x0, x1, out, n, BLOCK=BLOCK_SIZE)
        return out
