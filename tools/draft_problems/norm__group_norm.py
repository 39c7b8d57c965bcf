"""GroupNorm with 4 groups. (kegen draft-coverage problem: norm)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(4, 16, 10, 10)]


def get_init_inputs():
    return []
