"""DLRM dot-product feature interaction: pairwise dots of dense + sparse features, lower triangle."""

import torch
import torch.nn as nn

BATCH = 256
NUM_SPARSE = 15
DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, dense, sparse):
        t = torch.cat([dense.unsqueeze(1), sparse], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        num = t.shape[1]
        li, lj = torch.tril_indices(num, num, offset=-1)
        return torch.cat([dense, z[:, li, lj]], dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, NUM_SPARSE, DIM)]


def get_init_inputs():
    return []
