"""Elementwise leaky_relu. (kegen draft-coverage problem: activation)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, negative_slope=0.01)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
