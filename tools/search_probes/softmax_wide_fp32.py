"""Softmax over a vocabulary-wide row: 32 x 8192 fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(32, 8192)]


def get_init_inputs():
    return []
