"""Matrix transpose into a new contiguous tensor (float32)."""

import torch
import torch.nn as nn

ROWS = 512
COLS = 384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
