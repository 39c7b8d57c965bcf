"""Bucketize values against sorted boundaries (torch.bucketize, right=False; int64 out)."""

import torch
import torch.nn as nn

N = 65536
NUM_BOUNDARIES = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, boundaries):
        return torch.bucketize(x, boundaries)


def get_inputs():
    return [torch.randn(N), torch.sort(torch.randn(NUM_BOUNDARIES)).values]


def get_init_inputs():
    return []
