"""Conv3d 3x3x3. (kegen draft-coverage problem: conv)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 2, 6, 6, 6)]


def get_init_inputs():
    return []
