"""Attention's head split: (batch, seq, heads * dim) -> (batch, heads, seq, dim), contiguous, fp16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        b, s, _ = x.shape
        return x.view(b, s, 16, 64).permute(0, 2, 1, 3).contiguous()


def get_inputs():
    return [torch.randn(4, 512, 1024, dtype=torch.float16)]


def get_init_inputs():
    return []
