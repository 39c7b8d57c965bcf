"""InstanceNorm2d. (kegen draft-coverage problem: norm)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(8)

    def forward(self, x):
        return self.inorm(x)


def get_inputs():
    return [torch.randn(4, 8, 12, 12)]


def get_init_inputs():
    return []
