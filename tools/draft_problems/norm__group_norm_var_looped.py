"""KernelBench-style problem (kegen draft-coverage problem: norm)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.gn(x) + torch.var(x, dim=(2, 3), keepdim=True)


def get_inputs():
    return [torch.randn(2, 4, 48, 48)]


def get_init_inputs():
    return []
