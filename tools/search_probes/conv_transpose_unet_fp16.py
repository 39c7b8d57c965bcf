"""ConvTranspose2d 2x upsampling (a U-Net decoder stage), fp16: 8 x 128 x 32 x 32 -> 8 x 64 x 64 x 64."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(128, 64, 2, stride=2).half()

    def forward(self, x):
        return self.up(x)


def get_inputs():
    return [torch.randn(8, 128, 32, 32, dtype=torch.float16)]


def get_init_inputs():
    return []
