"""A product with a [K, N] weight kept as the model stores it (`x @ W + b`, then tanh): 2 x 12 x 40 -> 36."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(40, 36) * 0.1)
        self.b = nn.Parameter(torch.randn(36))

    def forward(self, x):
        return torch.tanh(torch.matmul(x, self.w) + self.b)


def get_inputs():
    return [torch.randn(2, 12, 40)]


def get_init_inputs():
    return []
