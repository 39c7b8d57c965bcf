"""ConvTranspose2d, max-pool, tanh. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(4, 4, 3, stride=2)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return torch.tanh(self.pool(self.conv(x)))


def get_inputs():
    return [torch.randn(1, 4, 6, 6)]


def get_init_inputs():
    return []
