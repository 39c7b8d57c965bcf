"""GEGLU feed-forward written as most models write it: one projection to twice the width, chunked into
value and gate, then down-projected; 256 tokens, 512 -> 2 x 1024 -> 512, fp16 weights (float32 math)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(512, 2048).half()
        self.out = nn.Linear(1024, 512).half()

    def forward(self, x):
        h = F.linear(x.float(), self.proj.weight.float(), self.proj.bias.float())
        value, gate = h.chunk(2, dim=-1)
        h = (value * F.gelu(gate)).to(x.dtype)
        return F.linear(h.float(), self.out.weight.float(), self.out.bias.float()).to(x.dtype)


def get_inputs():
    return [torch.randn(256, 512, dtype=torch.float16)]


def get_init_inputs():
    return []
