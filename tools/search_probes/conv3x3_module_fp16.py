"""A ResNet-style 3x3 convolution written as a module in fp16: 4 x 64 -> 128 channels, 28x28, padding 1."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3, padding=1).half()

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 64, 28, 28, dtype=torch.float16)]


def get_init_inputs():
    return []
