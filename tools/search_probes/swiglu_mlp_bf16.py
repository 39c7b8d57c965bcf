"""LLM feed-forward block (SwiGLU): 256 tokens, 512 -> 1024 -> 512, bf16 weights (float32 math)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter((torch.randn(1024, 512) * 0.04).to(torch.bfloat16))
        self.w3 = nn.Parameter((torch.randn(1024, 512) * 0.04).to(torch.bfloat16))
        self.w2 = nn.Parameter((torch.randn(512, 1024) * 0.03).to(torch.bfloat16))

    def forward(self, x):
        xf = x.float()
        h = F.silu(xf @ self.w1.float().t()) * (xf @ self.w3.float().t())
        return (h.to(x.dtype).float() @ self.w2.float().t()).to(x.dtype)


def get_inputs():
    return [torch.randn(256, 512, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
