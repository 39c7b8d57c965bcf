"""RMS normalization forward: y = x / sqrt(mean(x^2) + eps) * weight (float32)."""

import torch
import torch.nn as nn

BATCH = 128
DIM = 1024
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
        return x * rstd * weight


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(DIM)]


def get_init_inputs():
    return []
