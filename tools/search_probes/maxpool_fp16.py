"""ResNet's stem pooling: MaxPool2d(3, stride 2, padding 1) on 8 x 64 x 56 x 56 fp16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(8, 64, 56, 56, dtype=torch.float16)]


def get_init_inputs():
    return []
