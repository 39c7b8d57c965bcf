"""A 3-D activation times a 2-D weight with ReLU: relu(x @ w)."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, w):
        return torch.relu(x @ w)


def get_inputs():
    return [torch.randn(2, ROWS, 12), torch.randn(12, 10)]


def get_init_inputs():
    return []
