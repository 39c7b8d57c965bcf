"""Seed: linear + bias + SiLU in one kernel; 64x64 tiles, K loop of 32, float32 accumulator."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def linear_silu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + ks[None, :] * stride_xk, mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + ks[:, None] * stride_wk + offs_n[None, :] * stride_wn, mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(x, wt)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = acc + bias[None, :]
    acc = acc / (1.0 + tl.exp(-acc))
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

class ModelNew(nn.Module):

    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randn(out_features, in_features) * in_features ** (-0.5)
        self.weight = nn.Parameter(weight.to(torch.float16))
        self.bias = nn.Parameter((torch.randn(out_features) * 0.1).to(torch.float16))

    def forward(self, x):
        M, K = x.shape
        w = self.weight.detach()
        b = self.bias.detach()
        N = w.shape[0]
        y = torch.empty((M, N), dtype=x.dtype)
        BM, BN, BK = (256, 128, 64)
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        linear_silu_kernel[grid](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_stages=2)
        return y
