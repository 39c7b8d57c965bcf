"""MaxPool1d k=4 s=2 p=1. (kegen draft-coverage problem: pooling)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(4, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(4, 8, 64)]


def get_init_inputs():
    return []
