"""RMSNorm over the last dimension of a 2048x3072 bfloat16 tensor (float32 statistics), with a weight."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


ROWS = _size(2048)
COLS = _size(3072)
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
        return y.to(x.dtype)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.bfloat16), torch.randn(COLS, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
