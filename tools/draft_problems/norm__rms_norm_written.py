"""RMSNorm written out over dim 1. (kegen draft-coverage problem: norm)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-5)
        return x / rms


def get_inputs():
    return [torch.randn(4, 16, 8, 8)]


def get_init_inputs():
    return []
