"""Scaled dot-product attention forward, no mask: batch 2 x 8 heads x sequence 1024 x head_dim 64, float16
(float32 softmax and accumulation)."""

import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


BATCH = 2
HEADS = 8
SEQ = _size(1024)
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5
        return torch.matmul(torch.softmax(scores, dim=-1), v.float()).to(q.dtype)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
