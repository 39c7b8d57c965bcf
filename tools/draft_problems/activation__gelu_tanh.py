"""Elementwise gelu_tanh. (kegen draft-coverage problem: activation)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
