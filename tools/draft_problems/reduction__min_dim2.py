"""Reduction min_dim2 of a (8, 16, 32) tensor. (kegen draft-coverage problem: reduction)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.min(x, dim=2)[0]


def get_inputs():
    return [torch.randn(8, 16, 32)]


def get_init_inputs():
    return []
