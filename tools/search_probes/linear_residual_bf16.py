"""x @ W^T + b + residual in bf16 (a transformer's output projection): 1000 x 1536 -> 1536."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(1536, 1536, dtype=torch.bfloat16)

    def forward(self, x, residual):
        return self.proj(x) + residual


def get_inputs():
    return [torch.randn(1000, 1536, dtype=torch.bfloat16), torch.randn(1000, 1536, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
