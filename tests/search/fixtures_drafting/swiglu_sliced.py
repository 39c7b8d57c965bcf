"""SwiGLU over a packed gate/up projection split by slices, fp16 modules, in fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(32, 96, bias=False).half()
        self.down = nn.Linear(48, 32, bias=False).half()

    def forward(self, x):
        gu = self.gate_up(x)
        return self.down(F.silu(gu[..., :48]) * gu[..., 48:])


def get_inputs():
    return [torch.randn(18, 32, dtype=torch.float16)]


def get_init_inputs():
    return []
