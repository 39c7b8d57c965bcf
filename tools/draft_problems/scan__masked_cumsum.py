"""Masked cumsum. (kegen draft-coverage problem: scan)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=1)


def get_inputs():
    return [torch.randn(8, 64), torch.randint(0, 2, (8, 64)).bool()]


def get_init_inputs():
    return []
