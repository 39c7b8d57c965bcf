"""Embedding lookup in a table that is the model's own parameter: F.embedding(idx, self.table)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 5
BAG = 3


class Model(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.table = nn.Parameter(torch.randn(num_embeddings, dim))

    def forward(self, idx):
        return F.embedding(idx, self.table)


def get_inputs():
    return [torch.randint(0, 50, (BATCH, BAG))]


def get_init_inputs():
    return [50, 72]
