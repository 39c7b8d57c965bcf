"""Softmax over the sequence (dim 1) of [batch, seq, features] scores, fp32: 32 x 512 x 256."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(32, 512, 256)]


def get_init_inputs():
    return []
