"""MaxPool3d k=2. (kegen draft-coverage problem: pooling)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(2, 4, 8, 8, 8)]


def get_init_inputs():
    return []
