"""ResNet-like block in inference: 3x3 conv (no bias), BatchNorm (eval), ReLU; 2 x 32 -> 64, 28x28."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(64)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
        self.bn.eval()

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 32, 28, 28)]


def get_init_inputs():
    return []
