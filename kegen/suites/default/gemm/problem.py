"""GEMM: C = A @ B in float32."""

import torch
import torch.nn as nn

M = 256
N = 256
K = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
