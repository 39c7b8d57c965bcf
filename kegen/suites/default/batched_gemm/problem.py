"""Batched GEMM: C[b] = A[b] @ B[b] in float32."""

import torch
import torch.nn as nn

BATCH = 4
M = 128
N = 128
K = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
