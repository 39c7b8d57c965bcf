"""A float32 matrix product: 64 x 96 @ 96 x 80."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(64, 96), torch.randn(96, 80)]


def get_init_inputs():
    return []
