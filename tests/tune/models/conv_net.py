"""A small convolutional classifier (written outside kegen's models): conv2d, BatchNorm in eval mode,
ReLU, residual, global average pooling, a linear head."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn(self.stem(x)))
        h = torch.relu(h + self.conv(h))
        return self.head(h.mean(dim=(2, 3)))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs() -> list[int]:
    return []


def get_input_variants() -> list[list[torch.Tensor]]:
    return [[torch.randn(1, 3, 8, 8)]]
