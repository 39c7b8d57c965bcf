"""Cross-entropy. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.randn(32, 10), torch.randint(0, 10, (32,))]


def get_init_inputs():
    return []
