"""Bias row vector and per-row scale broadcast against a 2-D tensor: relu(x + b) * s."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, bias, scale):
        return torch.relu(x + bias) * scale


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(COLS), torch.randn(ROWS, 1)]


def get_init_inputs():
    return []
