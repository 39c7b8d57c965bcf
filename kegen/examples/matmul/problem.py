"""Matrix multiplication with a ReLU epilogue (KernelBench format)."""

import torch
import torch.nn as nn

M = 64
N = 64
K = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b))


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
