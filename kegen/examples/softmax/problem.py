"""Row softmax over the last dimension (KernelBench format)."""

import torch
import torch.nn as nn

ROWS = 16
COLS = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
