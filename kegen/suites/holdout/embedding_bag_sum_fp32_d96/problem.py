"""Embedding bag (sum pooling) over a 131072-row table of float32 rows of 96: 3072 bags with
long-tail sizes (0..96, mean ~20) of Zipf-distributed row ids (hot rows);
offsets with include_last_offset."""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


NUM_EMBEDDINGS = _size(131072)
EMBEDDING_DIM = 96
NUM_BAGS = _size(3072)
MAX_BAG = 96


def _long_tail(n, high):
    """`n` integers in [0, high] with P(v) ~ 1/(v + 1): most small, a long tail up to `high`."""
    return torch.exp(torch.rand(n, dtype=torch.float64) * math.log(high + 1)).long().clamp(1, high + 1) - 1


def _zipf_rows(n, num_rows):
    """`n` row ids, rank r drawn with P ~ 1/r, ranks scattered over the table by an odd multiplier."""
    rank = _long_tail(n, num_rows - 1)
    return (rank * 2654435761) % num_rows


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        pooled = F.embedding_bag(indices, weight.float(), offsets, mode="sum", include_last_offset=True)
        return pooled.to(weight.dtype)

    def roofline_bytes(self, inputs, outputs):
        """Fewest DRAM bytes: each distinct row gathered once, the indices, offsets and output.
        (kegen's roofline calls this with the lists of input and output tensors.)"""
        weight, indices, offsets = inputs
        rows = int(torch.unique(indices).numel())
        gathered = rows * weight.shape[1] * weight.element_size()
        return gathered + sum(t.numel() * t.element_size() for t in [indices, offsets, *outputs])


def get_inputs():
    lengths = _long_tail(NUM_BAGS, MAX_BAG)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    indices = _zipf_rows(int(offsets[-1]), NUM_EMBEDDINGS)
    return [torch.randn(NUM_EMBEDDINGS, EMBEDDING_DIM, dtype=torch.float32), indices, offsets]


def get_init_inputs():
    return []
