"""LayerNorm with affine weights, 2048 x 768 fp16 (float32 statistics)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(768).to(torch.float16)

    def forward(self, x):
        return F.layer_norm(x.float(), (768,), self.ln.weight.float(), self.ln.bias.float(), 1e-5).to(x.dtype)


def get_inputs():
    return [torch.randn(2048, 768, dtype=torch.float16)]


def get_init_inputs():
    return []
