"""Transformer encoder block (KernelBench layout): multi-head self-attention, LayerNorm, GELU MLP,
residuals. `PRESETS["production"]` gives production-scale sizes; the module-level default is small."""

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "small": {"batch": 2, "seq": 16, "dim": 32, "heads": 2},
    "production": {"batch": 32, "seq": 512, "dim": 1024, "heads": 16},
}
CFG = PRESETS["small"]


class Model(nn.Module):
    def __init__(self, dim: int = CFG["dim"], heads: int = CFG["heads"]) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(CFG["batch"], CFG["seq"], CFG["dim"])]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [[torch.randn(1, CFG["seq"], CFG["dim"])], [torch.randn(CFG["batch"], CFG["seq"] * 2, CFG["dim"])]]
