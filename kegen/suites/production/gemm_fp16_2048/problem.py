"""GEMM C = A @ B, 2048x2048x2048 in float16 (float32 accumulation, float16 output)."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


M = _size(2048)
N = _size(2048)
K = _size(2048)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
