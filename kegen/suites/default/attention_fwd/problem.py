"""Scaled dot-product attention forward, no mask (float32, batch x heads x seq x head_dim)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
HEADS = 4
SEQ = 128
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
