"""A grouped 3x3 convolution (8 groups of 8 channels) with ReLU: 1 x 64 x 16 x 16, fp16. Its draft's
launch takes the weight-stationary kernel on mtia and the row kernel on a GPU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, padding=1, groups=8, bias=False).half()

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(1, 64, 16, 16, dtype=torch.float16)]


def get_init_inputs():
    return []
