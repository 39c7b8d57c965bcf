"""ConvTranspose2d stride 2. (kegen draft-coverage problem: conv)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 6, 6)]


def get_init_inputs():
    return []
