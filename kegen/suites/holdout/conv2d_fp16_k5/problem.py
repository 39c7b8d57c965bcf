"""2-D convolution with bias, 5x5, padding 2: batch 4, 32 -> 96 channels, 40x40 images, float16
(float32 accumulation)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


BATCH = 4
IN_CHANNELS = _size(32)
OUT_CHANNELS = _size(96)
HEIGHT = _size(40, 8)
WIDTH = _size(40, 8)
KERNEL_SIZE = 5


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.conv = conv.to(torch.float16)

    def forward(self, x):
        w, b = self.conv.weight.float(), self.conv.bias.float()
        return F.conv2d(x.float(), w, b, padding=self.conv.padding).to(x.dtype)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH, dtype=torch.float16)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE]
