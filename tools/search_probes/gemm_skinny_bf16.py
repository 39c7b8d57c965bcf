"""Decode-time linear layer: 16 tokens x 2048 -> 2048, bf16 (float32 accumulation)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2048, 2048).to(torch.bfloat16) * 0.02)

    def forward(self, x):
        return (x.float() @ self.weight.float().t()).to(x.dtype)


def get_inputs():
    return [torch.randn(16, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
