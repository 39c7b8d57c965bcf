"""DLRM-style ranking model (KernelBench layout): embedding bags (mode="mean", with offsets), a bottom
MLP over dense features, pairwise dot-product interaction, a top MLP. `PRESETS["production"]` gives
production-scale sizes; the module-level constants are the small default that tunes in minutes."""

import torch
import torch.nn as nn

PRESETS = {
    "small": {"batch": 8, "dense": 16, "dim": 16, "tables": 3, "rows": 64, "bag": 4},
    "production": {"batch": 2048, "dense": 512, "dim": 128, "tables": 26, "rows": 1_000_000, "bag": 40},
}
CFG = PRESETS["small"]


class Model(nn.Module):
    def __init__(
        self,
        dense: int = CFG["dense"],
        dim: int = CFG["dim"],
        tables: int = CFG["tables"],
        rows: int = CFG["rows"],
    ) -> None:
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="mean") for _ in range(tables))
        self.bottom = nn.Sequential(nn.Linear(dense, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        n = tables + 1
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1))
        iu = torch.triu_indices(n, n, offset=1)
        self.register_buffer("iu0", iu[0], persistent=False)
        self.register_buffer("iu1", iu[1], persistent=False)

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        feats = [x] + [bag(indices[t], offsets) for t, bag in enumerate(self.bags)]
        z = torch.stack(feats, dim=1)  # (B, n, dim)
        inter = torch.bmm(z, z.transpose(1, 2))  # pairwise dot products
        iu0, iu1 = self.get_buffer("iu0"), self.get_buffer("iu1")
        flat = inter[:, iu0, iu1]
        return torch.sigmoid(self.top(torch.cat([x, flat], dim=1)))


def _inputs(batch: int) -> list[torch.Tensor]:
    bag = CFG["bag"]
    dense = torch.randn(batch, CFG["dense"])
    indices = torch.randint(0, CFG["rows"], (CFG["tables"], batch * bag))
    offsets = torch.arange(0, batch * bag, bag)
    return [dense, indices, offsets]


def get_inputs() -> list[torch.Tensor]:
    return _inputs(CFG["batch"])


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [_inputs(CFG["batch"] // 2), _inputs(CFG["batch"] * 2)]
