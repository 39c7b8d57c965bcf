"""Two projections of one input summed, then a third layer (a graph of linears, not a stack)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(20, 30)
        self.b = nn.Linear(20, 30, bias=False)
        self.c = nn.Linear(30, 10)

    def forward(self, x):
        return self.c(torch.relu(self.a(x) + 0.5 * self.b(x)))


def get_inputs():
    return [torch.randn(16, 20)]


def get_init_inputs():
    return []
