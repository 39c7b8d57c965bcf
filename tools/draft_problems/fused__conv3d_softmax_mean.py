"""Conv3d, softmax over channels, mean. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3)

    def forward(self, x):
        return torch.softmax(self.conv(x), dim=1).mean(dim=(2, 3, 4))


def get_inputs():
    return [torch.randn(1, 2, 6, 6, 6)]


def get_init_inputs():
    return []
