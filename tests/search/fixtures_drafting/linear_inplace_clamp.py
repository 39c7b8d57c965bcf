"""A two-layer MLP built as nn.Sequential with an in-place ReLU, its output clamped in place to a band."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(20, 28), nn.ReLU(inplace=True), nn.Linear(28, 12))

    def forward(self, x):
        y = self.mlp(x)
        return y.clamp_(-0.5, 0.75)


def get_inputs():
    return [torch.randn(5, 20)]


def get_init_inputs():
    return []
