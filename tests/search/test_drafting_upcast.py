"""References written as the production suite writes them (fp16/bf16 operands upcast with `.float()`,
the result cast back with `.to(x.dtype)`, sizes read with `x.shape[-1]`) drafted from templates: the
dtype and size reads fold to the traced values (`graph.fold_metadata`) and the patterns read through
the casts. Each draft checked on the simulator against the reference."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kegen.search.operators.drafting.graph import trace
from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

H, B = "torch.float16", "torch.bfloat16"
CASES = {
    # name: (__init__ lines, forward args, body, inputs, op class)
    "matmul_upcast": (
        "",
        "a, b",
        "        return torch.matmul(a.float(), b.float()).to(a.dtype)",
        f"torch.randn(48, 40, dtype={H}), torch.randn(40, 24, dtype={H})",
        "matmul",
    ),
    "bmm_upcast_bf16": (
        "",
        "a, b",
        "        return torch.bmm(a.float(), b.float()).to(a.dtype)",
        f"torch.randn(3, 20, 32, dtype={B}), torch.randn(3, 32, 24, dtype={B})",
        "matmul",
    ),
    "layer_norm_upcast": (
        "",
        "x, weight, bias",
        "        y = F.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), 1e-5)\n"
        "        return y.to(x.dtype)",
        f"torch.randn(37, 96, dtype={H}), torch.randn(96, dtype={H}), torch.randn(96, dtype={H})",
        "normalization",
    ),
    "rms_norm_written_bf16": (
        "",
        "x, weight",
        "        xf = x.float()\n"
        "        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()\n"
        "        return y.to(x.dtype)",
        f"torch.randn(2, 19, 160, dtype={B}), torch.randn(160, dtype={B})",
        "normalization",
    ),
    "linear_parameters_upcast": (
        f"        self.weight = nn.Parameter((torch.randn(48, 64) * 0.1).to({H}))\n"
        f"        self.bias = nn.Parameter((torch.randn(48) * 0.1).to({H}))",
        "x",
        "        return torch.relu(F.linear(x.float(), self.weight.float(), self.bias.float())).to(x.dtype)",
        f"torch.randn(2, 30, 64, dtype={H})",
        "matmul",
    ),
    "embedding_bag_upcast": (
        "",
        "weight, indices, offsets",
        '        pooled = F.embedding_bag(indices, weight.float(), offsets, mode="mean", include_last_offset=True)\n'
        "        return pooled.to(weight.dtype)",
        f"torch.randn(50, 24, dtype={H}), torch.randint(0, 50, (40,)), torch.tensor([0, 3, 3, 17, 40])",
        "embedding",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    init, args, body, inputs, _ = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(init=init or "        pass", args=args, body=body, inputs=inputs))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_upcasting_references_are_drafted_from_templates(tmp_path, name: str) -> None:
    assert_draft_correct_on_mtia(_problem(tmp_path, name), CASES[name][4])


def test_dtype_and_size_reads_fold_to_the_traced_values(tmp_path) -> None:
    path = tmp_path / "p.py"
    body = "        n = x.size(-1)\n        return x.view(-1, n).float().sum(dim=-1).to(x.dtype) * x.shape[0]"
    path.write_text(PROBLEM.format(init="        pass", args="x", body=body, inputs=f"torch.randn(6, 8, dtype={H})"))
    t = trace(path)
    assert not [n for n in t.ops if n.target is getattr or n.target == "size"]
    view = next(n for n in t.ops if n.target == "view")
    to = next(n for n in t.ops if n.target == "to")
    assert view.args[1:] == (-1, 8) and to.args[1] is torch.float16
    assert any(a == 6 for n in t.ops for a in n.args)  # x.shape[0]
