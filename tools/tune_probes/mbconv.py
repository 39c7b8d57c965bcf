"""MobileNetV3-style inverted residual: expand 1x1, depthwise 3x3, squeeze-excite, project 1x1."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c: int = 16, e: int = 64) -> None:
        super().__init__()
        self.expand = nn.Conv2d(c, e, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(e)
        self.dw = nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False)
        self.bn2 = nn.BatchNorm2d(e)
        self.se1 = nn.Linear(e, e // 4)
        self.se2 = nn.Linear(e // 4, e)
        self.project = nn.Conv2d(e, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.bn1(self.expand(x)))
        h = F.hardswish(self.bn2(self.dw(h)))
        s = h.mean((2, 3))
        s = F.hardsigmoid(self.se2(F.relu(self.se1(s))))
        h = h * s[:, :, None, None]
        return x + self.bn3(self.project(h))


def get_inputs():
    return [torch.randn(2, 16, 16, 16)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1, 16, 12, 12)]]
