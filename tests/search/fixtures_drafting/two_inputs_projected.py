"""Two inputs, each projected by its own linear layer, summed and projected again (an additive attention score)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(24, 40)
        self.b = nn.Linear(16, 40)
        self.out = nn.Linear(40, 24)

    def forward(self, x, y):
        return self.out(torch.tanh(self.a(x) + self.b(y)))


def get_inputs():
    return [torch.randn(10, 24), torch.randn(10, 16)]


def get_init_inputs():
    return []
