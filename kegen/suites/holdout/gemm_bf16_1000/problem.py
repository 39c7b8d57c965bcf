"""GEMM C = A @ B, 1000x1000x1000 in bfloat16 (no dimension a multiple of 16; float32 accumulation,
bfloat16 output)."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


M = _size(1000, 8)
N = _size(1000, 8)
K = _size(1000, 8)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
