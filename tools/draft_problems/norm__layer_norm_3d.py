"""LayerNorm over the last three dimensions. (kegen draft-coverage problem: norm)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((8, 8, 16))

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(4, 8, 8, 16)]


def get_init_inputs():
    return []
