"""Causal attention written out. (kegen draft-coverage problem: attention)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        causal = torch.triu(torch.ones(q.size(-2), q.size(-2), dtype=torch.bool), 1)
        s = s.masked_fill(causal, float("-inf"))
        return torch.softmax(s, dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 16, 32), torch.randn(2, 16, 32), torch.randn(2, 16, 32)]


def get_init_inputs():
    return []
