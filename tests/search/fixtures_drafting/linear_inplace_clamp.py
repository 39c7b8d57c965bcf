"""A stack of linear layers with in-place ReLUs and an in-place clamp of the output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dims):
        super().__init__()
        layers = []
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU(inplace=True)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x).clamp_(max=3.0)


def get_inputs():
    return [torch.randn(8, 24)]


def get_init_inputs():
    return [[24, 32, 16]]
