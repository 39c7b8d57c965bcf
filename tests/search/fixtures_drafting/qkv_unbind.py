"""A fused QKV projection returned as three head-split views (`permute` then `unbind`), fp16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(64, 192, bias=False).half()

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, 4, 16).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v


def get_inputs():
    return [torch.randn(2, 20, 64, dtype=torch.float16)]


def get_init_inputs():
    return []
