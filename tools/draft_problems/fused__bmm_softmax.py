"""Batched matmul then softmax. (kegen draft-coverage problem: fused)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, a, b):
        return torch.softmax(torch.bmm(a, b), dim=-1)


def get_inputs():
    return [torch.randn(4, 8, 16), torch.randn(4, 16, 12)]


def get_init_inputs():
    return []
