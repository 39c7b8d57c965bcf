"""Reductions over trailing dims of an elementwise chain, fused (drafting.rows.draft_fused_reduce):
global average pooling after a residual ReLU, an absolute maximum, row dot products; each draft checked
on the simulator against the reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, {args}):
        return {expr}


def get_inputs():
    torch.manual_seed(0)
    return [{inputs}]


def get_init_inputs():
    return []
"""

CASES = {
    "global_average_pool": ("x, r", "torch.relu(x + r).mean((2, 3))", "torch.randn(2, 6, 5, 7), torch.randn(2, 6, 5, 7)"),
    "absmax_keepdim": ("x", "x.abs().amax(dim=-1, keepdim=True)", "torch.randn(37, 100)"),
    "row_dot_fp16": (
        "a, b",
        "(a * b).sum(-1)",
        "torch.randn(33, 70, dtype=torch.float16), torch.randn(33, 70, dtype=torch.float16)",
    ),
    "exp_sum_two_dims": ("x", "torch.exp(x - 1.0).sum(dim=(-2, -1))", "torch.randn(3, 9, 40)"),
}


def _problem(tmp_path: Path, args: str, expr: str, inputs: str) -> Path:
    path = tmp_path / "p.py"
    path.write_text(PROBLEM.format(args=args, expr=expr, inputs=inputs))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_reductions_are_drafted(tmp_path, name: str) -> None:
    source = assert_draft_correct_on_mtia(_problem(tmp_path, *CASES[name]), "reduction", "fused_reduce_kernel")
    assert "fused_elementwise_kernel" not in source  # one kernel: the chain is never stored


@pytest.mark.parametrize(
    "args, expr, inputs",
    [
        ("x", "torch.relu(x).sum(0)", "torch.randn(8, 9)"),  # a leading dim
        ("x", "torch.relu(x).sum((0, 1))", "torch.randn(8, 9)"),  # every dim
        ("x, w", "(x * w).sum(-1)", "torch.randn(8, 9), torch.randn(9)"),  # a broadcast operand
    ],
)
def test_other_reductions_are_not_drafted_fused(tmp_path, args: str, expr: str, inputs: str) -> None:
    a = analyze(_problem(tmp_path, args, expr, inputs))
    assert a.source is None or "fused_reduce_kernel" not in a.source
