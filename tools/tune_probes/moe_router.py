"""A top-2 mixture-of-experts MLP with a softmax router (dense dispatch: every expert on every token,
weighted by the router's top-2 renormalised probabilities), layer-normed input, GELU experts."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d: int = 32, h: int = 64, experts: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, h) * 0.1)
        self.w2 = nn.Parameter(torch.randn(experts, h, d) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.norm(x)
        probs = F.softmax(self.router(t), dim=-1)
        top, idx = probs.topk(2, dim=-1)
        weights = torch.zeros_like(probs).scatter(-1, idx, top / top.sum(-1, keepdim=True))
        hidden = F.gelu(torch.einsum("bd,edh->ebh", t, self.w1))
        out = torch.einsum("ebh,ehd->ebd", hidden, self.w2)
        return x + torch.einsum("ebd,be->bd", out, weights)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(40, 32)]]
