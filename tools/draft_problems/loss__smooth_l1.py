"""Smooth L1 (Huber) loss. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(32, 16)]


def get_init_inputs():
    return []
