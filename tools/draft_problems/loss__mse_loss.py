"""MSE loss. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(32, 16)]


def get_init_inputs():
    return []
