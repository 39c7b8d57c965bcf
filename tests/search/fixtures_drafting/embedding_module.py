"""nn.Embedding lookup of a (batch, bag) index tensor."""

import torch
import torch.nn as nn

BATCH = 5
BAG = 3


class Model(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.emb = nn.Embedding(num_embeddings, dim)

    def forward(self, idx):
        return self.emb(idx)


def get_inputs():
    return [torch.randint(0, 50, (BATCH, BAG))]


def get_init_inputs():
    return [50, 72]
