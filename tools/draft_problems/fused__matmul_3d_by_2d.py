"""KernelBench-style problem (kegen draft-coverage problem: fused)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(4, 12, 20), torch.randn(20, 9)]


def get_init_inputs():
    return []
