"""A SwiGLU feed-forward over bf16 parameters, written with products: silu(x W1^T) * (x W3^T), then W2."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter((torch.randn(64, 32) * 0.1).to(torch.bfloat16))
        self.w3 = nn.Parameter((torch.randn(64, 32) * 0.1).to(torch.bfloat16))
        self.w2 = nn.Parameter((torch.randn(32, 64) * 0.1).to(torch.bfloat16))

    def forward(self, x):
        xf = x.float()
        h = F.silu(xf @ self.w1.float().t()) * (xf @ self.w3.float().t())
        return (h.to(x.dtype).float() @ self.w2.float().t()).to(x.dtype)


def get_inputs():
    return [torch.randn(20, 32, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
