"""Wide & Deep ranking model (written outside kegen's models): nn.Embedding lookups, a wide linear
part, a deep MLP over concatenated features, a sigmoid score."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 16, dense: int = 8) -> None:
        super().__init__()
        self.user = nn.Embedding(vocab, dim)
        self.item = nn.Embedding(vocab, dim)
        self.wide = nn.Linear(dense, 1)
        self.deep = nn.Sequential(nn.Linear(2 * dim + dense, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, users: torch.Tensor, items: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.user(users), self.item(items), dense], dim=1)
        return torch.sigmoid(self.wide(dense) + self.deep(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randint(0, 64, (8,)), torch.randint(0, 64, (8,)), torch.randn(8, 8)]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [[torch.randint(0, 64, (16,)), torch.randint(0, 64, (16,)), torch.randn(16, 8)]]
