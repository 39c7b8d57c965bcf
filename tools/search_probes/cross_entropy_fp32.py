"""Language-model loss: cross entropy of 512 tokens over a 8192-word vocabulary, fp32 logits, mean over
tokens."""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(512, VOCAB), torch.randint(0, VOCAB, (512,))]


def get_init_inputs():
    return []
