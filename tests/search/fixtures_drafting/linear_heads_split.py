"""A query projection returned split into heads: `q(x).view(b, t, heads, d).transpose(1, 2)`."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(64, 64)

    def forward(self, x):
        b, t, _ = x.shape
        return self.q(x).view(b, t, 4, 16).transpose(1, 2)


def get_inputs():
    return [torch.randn(2, 24, 64)]


def get_init_inputs():
    return []
