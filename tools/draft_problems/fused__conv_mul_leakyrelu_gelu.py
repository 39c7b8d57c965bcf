"""KernelBench-style problem (kegen draft-coverage problem: fused)."""

import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 8
height, width = 10, 10
kernel_size = 3
multiplier_shape = (out_channels, 1, 1)


class Model(nn.Module):
    """Conv2d, multiply by a learnable scalar tensor, LeakyReLU, GELU."""

    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU()

    def forward(self, x):
        x = self.conv(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        x = torch.nn.functional.gelu(x)
        return x


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, multiplier_shape]
