"""Transformer MLP up-projection: nn.Linear(768, 3072) in fp16 then tanh GELU; 512 tokens (float32 math)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(768, 3072).half()

    def forward(self, x):
        y = F.linear(x.float(), self.fc.weight.float(), self.fc.bias.float())
        return F.gelu(y, approximate="tanh").to(x.dtype)


def get_inputs():
    return [torch.randn(512, 768, dtype=torch.float16)]


def get_init_inputs():
    return []
