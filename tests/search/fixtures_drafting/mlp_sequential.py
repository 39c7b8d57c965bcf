"""Linear stack in nn.Sequential: Linear+bias, GELU(tanh), Linear without bias, Sigmoid."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(n_in, hidden),
            nn.GELU(approximate="tanh"),
            nn.Linear(hidden, n_out, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x):
        return self.mlp(x)


def get_inputs():
    return [torch.randn(2, ROWS, 24)]


def get_init_inputs():
    return [24, 20, 9]
