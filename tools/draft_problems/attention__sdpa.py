"""Scaled dot-product attention. (kegen draft-coverage problem: attention)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32)]


def get_init_inputs():
    return []
