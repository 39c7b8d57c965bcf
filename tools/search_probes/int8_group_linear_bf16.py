"""Group-wise int8 weight-only linear (one scale per output channel and 128 input channels, as GPTQ /
AWQ-style quantizers store them), bf16 activations: 256 x 2048 -> 2048."""

import torch
import torch.nn as nn

GROUP = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("qweight", torch.randint(-127, 128, (2048, 2048), dtype=torch.int8))
        self.register_buffer("scales", (torch.rand(2048, 2048 // GROUP) * 0.01 + 0.001).to(torch.bfloat16))

    def forward(self, x):
        n, k = self.qweight.shape
        w = self.qweight.float().view(n, k // GROUP, GROUP) * self.scales.float().unsqueeze(-1)
        return (x.float() @ w.view(n, k).t()).to(x.dtype)


def get_inputs():
    return [torch.randn(256, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
