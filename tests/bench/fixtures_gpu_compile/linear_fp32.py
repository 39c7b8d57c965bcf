"""A float32 linear layer with bias and ReLU: 48 x 96 -> 80."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 80)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(48, 96)]


def get_init_inputs():
    return []
