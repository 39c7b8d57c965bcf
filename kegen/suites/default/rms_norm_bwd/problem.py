"""RMS normalization backward: gradients (dx, dweight) of y = x * rsqrt(mean(x^2) + eps) * weight."""

import torch
import torch.nn as nn

BATCH = 128
DIM = 1024
EPS = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, dy):
        with torch.enable_grad():
            x_ = x.detach().requires_grad_(True)
            w_ = weight.detach().requires_grad_(True)
            y = x_ * torch.rsqrt(x_.pow(2).mean(dim=-1, keepdim=True) + EPS) * w_
            dx, dw = torch.autograd.grad(y, (x_, w_), dy)
        return dx, dw


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
