"""Jagged softmax: softmax over each segment's rows, per column, of a packed
(total, 64) float32 tensor; 1024 segments of long-tail lengths (0..256)."""

import math
import os

import torch
import torch.nn as nn

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


NUM_SEGMENTS = _size(1024)
DIM = 64
MAX_LEN = 256


def _long_tail(n, high):
    """`n` integers in [0, high] with P(v) ~ 1/(v + 1): most small, a long tail up to `high`."""
    return torch.exp(torch.rand(n, dtype=torch.float64) * math.log(high + 1)).long().clamp(1, high + 1) - 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]
        num = lengths.numel()
        segment = torch.repeat_interleave(torch.arange(num, device=values.device), lengths)
        index = segment[:, None].expand(-1, values.shape[1])
        seg_max = torch.full((num, values.shape[1]), float("-inf"), dtype=values.dtype, device=values.device)
        seg_max = seg_max.scatter_reduce(0, index, values, reduce="amax", include_self=True)
        e = torch.exp(values - seg_max[segment])
        denom = torch.zeros(num, values.shape[1], dtype=values.dtype, device=values.device)
        denom = denom.index_add_(0, segment, e)
        return e / denom[segment]


def get_inputs():
    lengths = _long_tail(NUM_SEGMENTS, MAX_LEN)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    return [torch.randn(int(offsets[-1]), DIM, dtype=torch.float32), offsets]


def get_init_inputs():
    return []
