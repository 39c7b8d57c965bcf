"""An fp16 3x3 convolution: 2 x 8 x 12 x 12 -> 16 channels, padding 1."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1).half()

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 12, 12, dtype=torch.float16)]


def get_init_inputs():
    return []
