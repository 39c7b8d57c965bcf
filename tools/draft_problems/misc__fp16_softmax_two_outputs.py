"""KernelBench-style problem (kegen draft-coverage problem: misc)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = torch.softmax(x.float(), dim=-1).half()
        return y, x.sum(dim=0)


def get_inputs():
    return [torch.randn(8, 64).half()]


def get_init_inputs():
    return []
