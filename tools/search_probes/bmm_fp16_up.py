"""Batched matmul, 8 x 256x512 @ 512x256, fp16 (float32 math)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a.float(), b.float()).to(a.dtype)


def get_inputs():
    return [torch.randn(8, 256, 512, dtype=torch.float16), torch.randn(8, 512, 256, dtype=torch.float16)]


def get_init_inputs():
    return []
