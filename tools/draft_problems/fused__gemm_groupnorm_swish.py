"""Linear, GroupNorm, swish. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)
        self.gn = nn.GroupNorm(8, 64)

    def forward(self, x):
        y = self.gn(self.fc(x))
        return y * torch.sigmoid(y)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
