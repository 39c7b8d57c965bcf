"""LLM decoder MLP with GPTQ-packed int4 weights (KernelBench layout): gate and up projections, SiLU
gating, down projection, residual. Each weight is eight 4-bit values an int32 along K (stored
(K / 8, N)), zero points packed eight an int32 along N and stored minus one, one fp16 scale per
output channel and group of input channels, unpacked in the forward as GPTQ's reference kernels do.
Variants: decode (one and 16 tokens) and a prefill chunk. `PRESETS["production"]` is a 7B model's MLP."""

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "small": {"tokens": 16, "dim": 256, "hidden": 704, "group": 64},
    "production": {"tokens": 16, "dim": 4096, "hidden": 11008, "group": 128},
}
CFG = PRESETS["small"]


class Int4Linear(nn.Module):
    """x @ W with W (K, N) = scales * (q - zeros), q and zeros packed 4-bit (GPTQ's layout)."""

    qweight: torch.Tensor
    qzeros: torch.Tensor
    scales: torch.Tensor

    def __init__(self, k: int, n: int, group: int) -> None:
        super().__init__()
        self.k, self.n, self.group = k, n, group
        words = torch.randint(-(2**31), 2**31 - 1, (k // 8, n), dtype=torch.int32)
        zeros = torch.randint(-(2**31), 2**31 - 1, (k // group, n // 8), dtype=torch.int32)
        self.register_buffer("qweight", words)
        self.register_buffer("qzeros", zeros)
        self.register_buffer("scales", (torch.rand(k // group, n) * 0.01 + 0.001).to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=x.device)
        q = ((self.qweight.unsqueeze(1) >> shifts[None, :, None]) & 15).reshape(self.k, self.n)
        groups = self.k // self.group
        z = ((self.qzeros.unsqueeze(2) >> shifts[None, None, :]) & 15).reshape(groups, self.n) + 1
        w = (q - z.repeat_interleave(self.group, dim=0)).to(x.dtype)
        return x @ (w * self.scales.repeat_interleave(self.group, dim=0))


class Model(nn.Module):
    def __init__(self, dim: int = CFG["dim"], hidden: int = CFG["hidden"], group: int = CFG["group"]) -> None:
        super().__init__()
        self.gate = Int4Linear(dim, hidden, group)
        self.up = Int4Linear(dim, hidden, group)
        self.down = Int4Linear(hidden, dim, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.silu(self.gate(x)) * self.up(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(CFG["tokens"], CFG["dim"], dtype=torch.float16)]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [
        [torch.randn(1, CFG["dim"], dtype=torch.float16)],
        [torch.randn(4 * CFG["tokens"], CFG["dim"], dtype=torch.float16)],
    ]
