"""RMSNorm over the last dimension of a 4096x4096 float16 tensor (float32 statistics), with a weight."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


ROWS = _size(4096)
COLS = _size(4096)
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
        return y.to(x.dtype)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.float16), torch.randn(COLS, dtype=torch.float16)]


def get_init_inputs():
    return []
