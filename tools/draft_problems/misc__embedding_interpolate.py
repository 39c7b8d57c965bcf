"""KernelBench-style problem (kegen draft-coverage problem: misc)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)

    def forward(self, idx, img):
        e = self.emb(idx).mean(dim=1)
        up = torch.nn.functional.interpolate(img, scale_factor=2, mode="nearest")
        return e.sum() + up.mean()


def get_inputs():
    return [torch.randint(0, 50, (4, 7)), torch.randn(1, 2, 5, 5)]


def get_init_inputs():
    return []
