"""A projection split into three parts (split sizes, not in column order of use), combined: q * sigmoid(k) + v."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(24, 48)

    def forward(self, x):
        v, q, k = self.proj(x).split([16, 16, 16], dim=-1)
        return q * torch.sigmoid(k) + v


def get_inputs():
    return [torch.randn(12, 24)]


def get_init_inputs():
    return []
