"""ResNet downsampling in inference, fp16: 3x3 conv with stride 2 (no bias), BatchNorm (eval), ReLU;
4 x 64 -> 128 channels, 28x28 -> 14x14."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(128)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
        self.half().eval()

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(4, 64, 28, 28, dtype=torch.float16)]


def get_init_inputs():
    return []
