"""Two-layer MLP with LayerNorm and GELU. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.ln = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x))))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
