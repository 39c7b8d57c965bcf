"""SwiGLU with the gate and up projections fused into one weight and split by slicing (as Llama-style
checkpoints with a packed `gate_up_proj` are run); 128 tokens, 512 -> 2 x 768 -> 512, bf16, in bf16."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(512, 1536, bias=False).to(torch.bfloat16)
        self.down = nn.Linear(768, 512, bias=False).to(torch.bfloat16)

    def forward(self, x):
        gu = self.gate_up(x)
        return self.down(F.silu(gu[..., :768]) * gu[..., 768:])


def get_inputs():
    return [torch.randn(128, 512, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
