"""A bf16 output projection with a residual (weights made in bf16, which ModelNew cannot rebuild by
seeded construction, so the draft reads the reference's); the residual arrives as a strided view."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(40, 36, dtype=torch.bfloat16)

    def forward(self, x, residual):
        return self.proj(x) + residual


def get_inputs():
    return [torch.randn(2, 5, 40, dtype=torch.bfloat16), torch.randn(36, 5, 2, dtype=torch.bfloat16).permute(2, 1, 0)]


def get_init_inputs():
    return []
