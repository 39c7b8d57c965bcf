"""GroupNorm (32 groups) with affine parameters then SiLU, a diffusion U-Net block's prologue:
4 x 128 x 32 x 32 fp32."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(32, 128)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return F.silu(self.norm(x))


def get_inputs():
    return [torch.randn(4, 128, 32, 32)]


def get_init_inputs():
    return []
