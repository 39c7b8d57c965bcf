"""GQA decode attention: 1 query token, 2048 cached keys, 16 query heads sharing 4 KV heads, fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k_cache, v_cache):
        groups = q.shape[1] // k_cache.shape[1]
        k = k_cache.repeat_interleave(groups, dim=1)
        v = v_cache.repeat_interleave(groups, dim=1)
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [
        torch.randn(4, 16, 1, 128, dtype=torch.float16),
        torch.randn(4, 4, 2048, 128, dtype=torch.float16),
        torch.randn(4, 4, 2048, 128, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
