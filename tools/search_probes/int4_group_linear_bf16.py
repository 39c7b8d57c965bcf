"""Packed int4 weight-only linear (two 4-bit values a byte along K, low nibble first, offset 8, one
bf16 scale per output channel and 128 input channels: the layout of common int4 weight-only
quantizers), bf16 activations: 256 x 2048 -> 2048."""

import torch
import torch.nn as nn

GROUP = 128
N, K = 2048, 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("qweight", torch.randint(0, 256, (N, K // 2), dtype=torch.uint8))
        self.register_buffer("scales", (torch.rand(N, K // GROUP) * 0.01 + 0.001).to(torch.bfloat16))

    def forward(self, x):
        q = torch.stack([self.qweight & 0xF, self.qweight >> 4], dim=-1).view(N, K)
        w = (q.float() - 8.0).view(N, K // GROUP, GROUP) * self.scales.float().unsqueeze(-1)
        return (x.float() @ w.view(N, K).t()).to(x.dtype)


def get_inputs():
    return [torch.randn(256, K, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
