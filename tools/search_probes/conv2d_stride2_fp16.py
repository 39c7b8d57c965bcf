"""3x3 convolution with stride 2 and padding 1 (downsampling), 2 x 32 -> 64 channels, 32x32, fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, stride=2, padding=1).to(torch.float16)

    def forward(self, x):
        return F.conv2d(x.float(), self.conv.weight.float(), self.conv.bias.float(), stride=2, padding=1).to(
            x.dtype
        )


def get_inputs():
    return [torch.randn(2, 32, 32, 32, dtype=torch.float16)]


def get_init_inputs():
    return []
