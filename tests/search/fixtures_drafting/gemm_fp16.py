"""Half-precision GEMM with fp32 accumulation, written with upcasts: (a.float() @ b.float()).half()."""

import torch
import torch.nn as nn

M = 20
N = 24
K = 40


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.float(), b.float()).half()


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
