"""1 - cosine similarity. (kegen draft-coverage problem: loss)."""

import math  # noqa: F401

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, predictions, targets):
        cos = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cos)


def get_inputs():
    return [torch.randn(16, 32), torch.randn(16, 32)]


def get_init_inputs():
    return []
