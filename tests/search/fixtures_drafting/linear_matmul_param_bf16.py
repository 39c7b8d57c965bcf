"""A linear layer spelled as a product with a bf16 parameter: `x.float() @ W.float().t()`, 24 x 40 -> 48."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter((torch.randn(48, 40) * 0.1).to(torch.bfloat16))

    def forward(self, x):
        return (x.float() @ self.weight.float().t()).to(x.dtype)


def get_inputs():
    return [torch.randn(24, 40, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
