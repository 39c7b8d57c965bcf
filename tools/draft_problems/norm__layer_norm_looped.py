"""KernelBench-style problem (kegen draft-coverage problem: norm)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(4096)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(4, 4096)]


def get_init_inputs():
    return []
