"""GPTQ-packed int4 linear at a decode shape: 16 tokens x 4096 -> 4096 fp16, int32 words of eight
values along K stored (K / 8, N), zero points packed eight to an int32 along N and stored minus one,
one fp16 scale per output channel and 128 input channels; the weight read dominates (8 MiB)."""

import torch
import torch.nn as nn

G, N, K = 128, 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("qweight", torch.randint(-(2**31), 2**31 - 1, (K // 8, N), dtype=torch.int32))
        zeros = torch.randint(-(2**31), 2**31 - 1, (K // G, N // 8), dtype=torch.int32)
        self.register_buffer("qzeros", zeros)
        self.register_buffer("scales", (torch.rand(K // G, N) * 0.01 + 0.001).to(torch.float16))

    def forward(self, x):
        shifts = torch.arange(0, 32, 4, dtype=torch.int32)
        q = ((self.qweight.unsqueeze(1) >> shifts[None, :, None]) & 15).reshape(K, N)
        z = ((self.qzeros.unsqueeze(2) >> shifts[None, None, :]) & 15).reshape(K // G, N) + 1
        w = (q - z.repeat_interleave(G, dim=0)).to(torch.float16) * self.scales.repeat_interleave(G, dim=0)
        return x @ w


def get_inputs():
    return [torch.randn(16, K, dtype=torch.float16)]


def get_init_inputs():
    return []
