"""Jagged sum: per-segment sum of rows of a packed (total, D) tensor given offsets (B + 1)."""

import torch
import torch.nn as nn

NUM_SEGMENTS = 64
DIM = 64
MAX_LEN = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]
        segment = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
        out = torch.zeros(lengths.numel(), values.shape[1], dtype=values.dtype)
        return out.index_add_(0, segment, values)


def get_inputs():
    lengths = torch.randint(0, MAX_LEN + 1, (NUM_SEGMENTS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    return [torch.randn(int(offsets[-1]), DIM), offsets]


def get_init_inputs():
    return []
