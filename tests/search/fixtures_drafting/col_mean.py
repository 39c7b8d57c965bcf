"""Mean over the first dimension (a column reduction)."""

import torch
import torch.nn as nn

ROWS = 37
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=0)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
