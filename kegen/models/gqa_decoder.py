"""LLM decoder attention block with grouped-query attention (KernelBench layout, Llama-style): RMSNorm,
query/key/value projections with fewer key/value heads than query heads, rotary position embedding,
causal attention with each key/value head shared by a group of query heads, the output projection and
the residual. Variants: one short and one long sequence. `PRESETS["production"]` is an 8B model's block."""

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "small": {"batch": 2, "seq": 64, "dim": 256, "heads": 8, "kv_heads": 2},
    "production": {"batch": 1, "seq": 2048, "dim": 4096, "heads": 32, "kv_heads": 8},
}
CFG = PRESETS["small"]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Model(nn.Module):
    inv_freq: torch.Tensor

    def __init__(
        self, dim: int = CFG["dim"], heads: int = CFG["heads"], kv_heads: int = CFG["kv_heads"]
    ) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm = nn.RMSNorm(dim, eps=1e-5, dtype=torch.float16)
        self.q = nn.Linear(dim, dim, bias=False, dtype=torch.float16)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False, dtype=torch.float16)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False, dtype=torch.float16)
        self.o = nn.Linear(dim, dim, bias=False, dtype=torch.float16)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        angles = torch.arange(s, device=x.device, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        groups = self.heads // self.kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.o(a.transpose(1, 2).reshape(b, s, d))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(CFG["batch"], CFG["seq"], CFG["dim"], dtype=torch.float16)]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [
        [torch.randn(1, CFG["seq"] // 2, CFG["dim"], dtype=torch.float16)],
        [torch.randn(CFG["batch"], CFG["seq"] * 2, CFG["dim"], dtype=torch.float16)],
    ]
