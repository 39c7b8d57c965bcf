"""LayerNorm over the last dimension of a 8192x1024 float16 tensor (float32 statistics), weight and bias."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


ROWS = _size(8192)
COLS = _size(1024)
EPS = 1e-5


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        y = F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), EPS)
        return y.to(x.dtype)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.float16), torch.randn(COLS, dtype=torch.float16),
            torch.randn(COLS, dtype=torch.float16)]


def get_init_inputs():
    return []
