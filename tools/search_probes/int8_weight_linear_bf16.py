"""Weight-only int8 linear (per-output-channel scales), bf16 activations: 256 x 2048 -> 2048."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("qweight", torch.randint(-127, 128, (2048, 2048), dtype=torch.int8))
        self.register_buffer("scale", (torch.rand(2048) * 0.01 + 0.001).to(torch.bfloat16))

    def forward(self, x):
        w = self.qweight.float() * self.scale.float()[:, None]
        return (x.float() @ w.t()).to(x.dtype)


def get_inputs():
    return [torch.randn(256, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
