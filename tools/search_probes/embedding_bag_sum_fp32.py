"""Recommendation-model sparse feature: nn.EmbeddingBag(20000, 64, mode="sum"), 512 bags of 1-40 ids."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(20000, 64, mode="sum")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets)


def get_inputs():
    lengths = torch.randint(1, 41, (512,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    return [torch.randint(0, 20000, (int(lengths.sum()),)), offsets]


def get_init_inputs():
    return []
