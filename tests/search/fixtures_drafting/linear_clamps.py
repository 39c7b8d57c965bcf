"""Linear layers with clamp-family epilogues: ReLU6, a clamp of the residual, hardtanh bounds."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(24, 40)
        self.act = nn.Hardtanh(-0.5, 2.0)
        self.fc2 = nn.Linear(40, 24)

    def forward(self, x, y):
        h = self.act(F.relu6(self.fc1(x) * 4.0))
        return torch.clamp(self.fc2(h), min=-1.0) + y.clamp(max=0.25)


def get_inputs():
    return [torch.randn(9, 24), torch.randn(9, 24)]


def get_init_inputs():
    return []
