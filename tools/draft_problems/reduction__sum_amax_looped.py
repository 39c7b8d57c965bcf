"""KernelBench-style problem (kegen draft-coverage problem: reduction)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1) + torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(4, 8192)]


def get_init_inputs():
    return []
