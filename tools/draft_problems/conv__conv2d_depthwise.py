"""Depthwise Conv2d. (kegen draft-coverage problem: conv)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 12, 12)]


def get_init_inputs():
    return []
