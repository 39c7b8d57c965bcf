"""MobileNetV2's depthwise stage in inference: 3x3 depthwise conv with stride 2 (no bias), BatchNorm
(eval), ReLU6; 4 x 96 channels, 56x56 -> 28x28, fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(96, 96, 3, stride=2, padding=1, groups=96, bias=False)
        self.bn = nn.BatchNorm2d(96)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
        self.act = nn.ReLU6()
        self.eval()

    def forward(self, x):
        return self.act(self.bn(self.dw(x)))


def get_inputs():
    return [torch.randn(4, 96, 56, 56)]


def get_init_inputs():
    return []
