"""MobileNet-style depthwise 3x3 convolution (groups = channels), 4 x 64 channels, 28x28, fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(64, 64, 3, padding=1, groups=64)

    def forward(self, x):
        return self.dw(x)


def get_inputs():
    return [torch.randn(4, 64, 28, 28)]


def get_init_inputs():
    return []
