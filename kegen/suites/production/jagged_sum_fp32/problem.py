"""Jagged sum: per-segment sum of the rows of a packed
(total, 128) float32 tensor; 1024 segments of long-tail lengths (0..256, P(len) ~ 1/(len + 1))."""

import math
import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


NUM_SEGMENTS = _size(1024)
DIM = 128
MAX_LEN = 256


def _long_tail(n, high):
    """`n` integers in [0, high] with P(v) ~ 1/(v + 1): most small, a long tail up to `high`."""
    return torch.exp(torch.rand(n, dtype=torch.float64) * math.log(high + 1)).long().clamp(1, high + 1) - 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]
        segment = torch.repeat_interleave(torch.arange(lengths.numel(), device=values.device), lengths)
        out = torch.zeros(lengths.numel(), values.shape[1], dtype=torch.float32, device=values.device)
        return out.index_add_(0, segment, values.float()).to(values.dtype)


def get_inputs():
    lengths = _long_tail(NUM_SEGMENTS, MAX_LEN)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    return [torch.randn(int(offsets[-1]), DIM, dtype=torch.float32), offsets]


def get_init_inputs():
    return []
