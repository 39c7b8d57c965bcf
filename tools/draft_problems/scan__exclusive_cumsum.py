"""Exclusive cumsum. (kegen draft-coverage problem: scan)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        exclusive = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1)[:, :-1]
        return torch.cumsum(exclusive, dim=1)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
