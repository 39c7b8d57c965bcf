"""KernelBench-style problem (kegen draft-coverage problem: misc)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1)[0] + torch.where(x > 0, x, 0.5)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
