"""Embedding bag (sum) over a table with jagged bags given by offsets (include_last_offset)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_EMBEDDINGS = 1024
EMBEDDING_DIM = 64
NUM_BAGS = 64
MAX_BAG = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, weight, indices, offsets):
        return F.embedding_bag(indices, weight, offsets, mode="sum", include_last_offset=True)


def get_inputs():
    lengths = torch.randint(0, MAX_BAG + 1, (NUM_BAGS,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    indices = torch.randint(0, NUM_EMBEDDINGS, (int(offsets[-1]),))
    return [torch.randn(NUM_EMBEDDINGS, EMBEDDING_DIM), indices, offsets]


def get_init_inputs():
    return []
