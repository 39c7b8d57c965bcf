"""Linear layer of a ranking model's MLP: y = SiLU(x @ W^T + b), 4096x768 -> 1536 in float16."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCALE = float(os.environ.get("KEGEN_SUITE_SCALE", "1"))


def _size(n, multiple=16):
    """`n` times KEGEN_SUITE_SCALE (tests run reduced shapes), a positive multiple of `multiple`."""
    return max(multiple, round(n * _SCALE / multiple) * multiple)


BATCH = _size(4096)
IN_FEATURES = _size(768)
OUT_FEATURES = _size(1536)
DTYPE = torch.float16


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter((torch.randn(out_features, in_features) * in_features ** -0.5).to(DTYPE))
        self.bias = nn.Parameter((torch.randn(out_features) * 0.1).to(DTYPE))

    def forward(self, x):
        w = self.weight.float()
        b = self.bias.float()
        return F.silu(F.linear(x.float(), w, b)).to(x.dtype)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES, dtype=DTYPE)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
