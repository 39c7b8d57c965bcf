"""Convolutional transformer block (KernelBench layout): a conv2d stem, a depthwise conv1d token mixer,
then self-attention with LayerNorm. `PRESETS["production"]` gives production-scale sizes."""

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "small": {"batch": 2, "channels": 4, "size": 8, "dim": 16, "heads": 2},
    "production": {"batch": 32, "channels": 64, "size": 56, "dim": 256, "heads": 8},
}
CFG = PRESETS["small"]


class Model(nn.Module):
    def __init__(
        self, channels: int = CFG["channels"], dim: int = CFG["dim"], heads: int = CFG["heads"]
    ) -> None:
        super().__init__()
        self.heads = heads
        self.stem = nn.Conv2d(channels, dim, kernel_size=3, stride=2, padding=1)
        self.mixer = nn.Conv1d(dim, dim, kernel_size=3, padding=1, groups=dim)
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = F.relu(self.stem(x)).flatten(2)  # (B, dim, tokens)
        t = (t + self.mixer(t)).transpose(1, 2)  # (B, tokens, dim)
        b, s, d = t.shape
        q, k, v = self.qkv(self.ln(t)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        return t + self.proj(a)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(CFG["batch"], CFG["channels"], CFG["size"], CFG["size"])]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [[torch.randn(1, CFG["channels"], CFG["size"], CFG["size"])]]
