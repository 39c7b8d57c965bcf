"""Linear, sigmoid, sum over dim 1. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 48)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
