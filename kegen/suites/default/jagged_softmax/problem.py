"""Jagged softmax: softmax over each segment's rows, per column, of a packed (total, D) tensor."""

import torch
import torch.nn as nn

NUM_SEGMENTS = 64
DIM = 32
MAX_LEN = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]
        num = lengths.numel()
        segment = torch.repeat_interleave(torch.arange(num), lengths)
        index = segment[:, None].expand(-1, values.shape[1])
        seg_max = torch.full((num, values.shape[1]), float("-inf"), dtype=values.dtype)
        seg_max = seg_max.scatter_reduce(0, index, values, reduce="amax", include_self=True)
        e = torch.exp(values - seg_max[segment])
        denom = torch.zeros(num, values.shape[1], dtype=values.dtype).index_add_(0, segment, e)
        return e / denom[segment]


def get_inputs():
    lengths = torch.randint(0, MAX_LEN + 1, (NUM_SEGMENTS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    return [torch.randn(int(offsets[-1]), DIM), offsets]


def get_init_inputs():
    return []
