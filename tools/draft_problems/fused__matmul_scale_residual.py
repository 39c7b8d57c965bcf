"""Matmul, scale and residual. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b, c):
        return torch.matmul(a, b) * 0.5 + c


def get_inputs():
    return [torch.randn(16, 32), torch.randn(32, 24), torch.randn(16, 24)]


def get_init_inputs():
    return []
