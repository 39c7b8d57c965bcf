"""AvgPool2d k=3 s=1 p=1. (kegen draft-coverage problem: pooling)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return []
