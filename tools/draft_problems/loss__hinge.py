"""Hinge loss. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    return [torch.randn(64, 1), torch.randint(0, 2, (64, 1)).float() * 2 - 1]


def get_init_inputs():
    return []
