"""GQA causal prefill attention: 8 query heads over 2 KV heads, 512 tokens, head dim 64, fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        k = k[:, :, None].expand(-1, -1, 4, -1, -1).reshape(q.shape)
        v = v[:, :, None].expand(-1, -1, 4, -1, -1).reshape(q.shape)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [
        torch.randn(1, 8, 512, 64, dtype=torch.float16),
        torch.randn(1, 2, 512, 64, dtype=torch.float16),
        torch.randn(1, 2, 512, 64, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
