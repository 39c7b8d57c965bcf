"""Helpers of the inductor tests: KernelBench-format problem files written per test."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_problem(tmp: Path, name: str, init: str, forward: str, inputs: str, args: str = "x") -> Path:
    """A KernelBench-format problem file: Model.__init__ body, forward body, get_inputs list."""
    src = f"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init or "pass"}

    def forward(self, {args}):
        {forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""
    path = tmp / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    return path
