"""KernelBench-style problem (kegen draft-coverage problem: fused)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = self.drop(self.fc(x))
        return torch.nn.functional.normalize(torch.softmax(x.mean(dim=1, keepdim=True) + x, dim=1), dim=1)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
