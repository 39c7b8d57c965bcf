"""cumprod over dim 1. (kegen draft-coverage problem: scan)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.cumprod(x, dim=1)


def get_inputs():
    return [torch.rand(8, 32) + 0.5]


def get_init_inputs():
    return []
