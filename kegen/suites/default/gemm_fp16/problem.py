"""GEMM in half precision: C = A @ B with float16 inputs and output (float32 accumulation)."""

import torch
import torch.nn as nn

M = 256
N = 256
K = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).half()


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
