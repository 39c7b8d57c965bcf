"""GEGLU: one projection to twice the width, chunked into value and gate, then projected down (float32)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(24, 80)
        self.out = nn.Linear(40, 24)

    def forward(self, x):
        value, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(value * F.gelu(gate))


def get_inputs():
    return [torch.randn(3, 10, 24)]


def get_init_inputs():
    return []
