"""A depthwise Conv1d token mixer and SiLU (a conformer's / ConvNeXt-1D's): 8 x 256 x 512, kernel 7."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(256, 256, 7, padding=3, groups=256)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.conv(x))


def get_inputs():
    return [torch.randn(8, 256, 512)]


def get_init_inputs():
    return []
