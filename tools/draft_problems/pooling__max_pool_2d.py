"""MaxPool2d k=3 s=2 p=1 dilation 2. (kegen draft-coverage problem: pooling)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(2, 4, 20, 20)]


def get_init_inputs():
    return []
