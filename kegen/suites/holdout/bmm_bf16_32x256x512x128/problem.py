"""Batched GEMM C[b] = A[b] @ B[b]: 16 x 512x512x512 in float16 (float32 accumulation)."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


BATCH = 32
M = _size(256)
N = _size(512)
K = _size(128)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(BATCH, M, K, dtype=torch.bfloat16), torch.randn(BATCH, K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
