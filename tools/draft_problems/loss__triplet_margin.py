"""Triplet margin loss. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=1.0)

    def forward(self, anchor, positive, negative):
        return self.loss(anchor, positive, negative)


def get_inputs():
    return [torch.randn(16, 32), torch.randn(16, 32), torch.randn(16, 32)]


def get_init_inputs():
    return []
