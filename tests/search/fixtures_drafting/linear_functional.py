"""F.linear with input weight and bias, SiLU epilogue then tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, weight, bias):
        return torch.tanh(F.silu(F.linear(x, weight, bias)))


def get_inputs():
    return [torch.randn(ROWS, 24), torch.randn(COLS, 24) * 0.2, torch.randn(COLS)]


def get_init_inputs():
    return []
