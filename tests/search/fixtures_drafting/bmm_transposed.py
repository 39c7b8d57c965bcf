"""Batched matmul against a transposed operand, scaled: bmm(q, k^T) * 0.5."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2)) * 0.5


def get_inputs():
    return [torch.randn(2, ROWS, 24), torch.randn(2, 10, 24)]


def get_init_inputs():
    return []
