"""nn.RMSNorm over the last dimension."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(COLS, eps=1e-5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(2, ROWS, COLS)]


def get_init_inputs():
    return []
