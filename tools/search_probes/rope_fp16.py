"""Rotary position embedding (LLaMA's rotate-half form) on queries: 4 x 8 heads x 512 x 64, fp16,
cos/sin tables held as buffers."""

import torch
import torch.nn as nn


def _tables(seq, dim, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(torch.float16), emb.sin().to(torch.float16)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        cos, sin = _tables(512, 64)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, q):
        half = q.shape[-1] // 2
        rotated = torch.cat([-q[..., half:], q[..., :half]], dim=-1)
        out = q.float() * self.cos.float() + rotated.float() * self.sin.float()
        return out.to(q.dtype)


def get_inputs():
    return [torch.randn(4, 8, 512, 64, dtype=torch.float16)]


def get_init_inputs():
    return []
