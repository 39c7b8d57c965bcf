"""Seed: implicit GEMM; per (batch, 32 output channels, 64 pixels) one dot per tap and 32 inputs."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_IN, C_OUT, H, W, KSIZE: tl.constexpr, PAD: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_P: tl.constexpr):
    n = tl.program_id(0)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    pix = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
    oh = pix // W
    ow = pix % W
    ci_offs = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)
    for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=2):
        ci = ci0 + ci_offs
        for kh in range(KSIZE):
            for kw in range(KSIZE):
                w = tl.load(w_ptr + co[:, None] * (C_IN * KSIZE * KSIZE) + ci[None, :] * (KSIZE * KSIZE) + kh * KSIZE + kw, mask=(co[:, None] < C_OUT) & (ci[None, :] < C_IN), other=0.0)
                ih = oh + (kh - PAD)
                iw = ow + (kw - PAD)
                inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (pix < H * W)
                x = tl.load(x_ptr + n * C_IN * H * W + ci[:, None] * (H * W) + (ih * W + iw)[None, :], mask=(ci[:, None] < C_IN) & inside[None, :], other=0.0)
                acc += tl.dot(w, x)
    bias = tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)
    acc += bias[:, None]
    tl.store(y_ptr + n * C_OUT * H * W + co[:, None] * (H * W) + pix[None, :], acc.to(y_ptr.dtype.element_ty), mask=(co[:, None] < C_OUT) & (pix[None, :] < H * W))

class ModelNew(nn.Module):

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.conv = conv.to(torch.float16)

    def forward(self, x):
        x = x.contiguous()
        n, c_in, h, w_ = x.shape
        w = self.conv.weight.detach().contiguous()
        b = self.conv.bias.detach().contiguous()
        c_out, _, ksize, _ = w.shape
        y = torch.empty((n, c_out, h, w_), dtype=x.dtype)
        grid = (n, triton.cdiv(c_out, 128), triton.cdiv(h * w_, 64))
        conv2d_kernel[grid](x, w, b, y, c_in, c_out, h, w_, KSIZE=ksize, PAD=ksize // 2, BLOCK_CO=128, BLOCK_CI=32, BLOCK_P=64, dual_core=True)
        return y
