"""ConvTranspose3d grouped. (kegen draft-coverage problem: conv)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 4, 3, stride=2, groups=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 4, 4, 4, 4)]


def get_init_inputs():
    return []
