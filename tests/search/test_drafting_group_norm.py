"""GroupNorm with its epilogue drafted as the one-group-per-program template (drafting/group_norm.py),
each form checked on the simulator against its reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm({groups}, {channels}, affine={affine}){to}
        if {affine}:
            with torch.no_grad():
                self.norm.weight.uniform_(0.5, 1.5)
                self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn({shape}, dtype={dtype})]


def get_init_inputs():
    return []
"""

CASES = {
    # name: (groups, channels, affine, module dtype cast, forward body, input shape, dtype)
    "module_silu_fp32": (4, 12, True, "", "return F.silu(self.norm(x))", "2, 12, 5, 7", "torch.float32"),
    "function_upcast_fp16": (
        2,
        8,
        True,
        ".half()",
        "w, b = self.norm.weight.float(), self.norm.bias.float()\n"
        "        return F.relu(F.group_norm(x.float(), 2, w, b, 1e-6)).to(x.dtype)",
        "3, 8, 6, 6",
        "torch.float16",
    ),
    "no_affine_1d": (3, 6, False, "", "return self.norm(x)", "2, 6, 9", "torch.float32"),
    "long_span_passes": (1, 4, True, "", "return F.gelu(self.norm(x))", "1, 4, 70, 70", "torch.float32"),
}


def _problem(tmp_path: Path, name: str) -> Path:
    groups, channels, affine, to, body, shape, dtype = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(
        PROBLEM.format(
            groups=groups,
            channels=channels,
            affine=affine,
            to=to,
            body="        " + body,
            shape=shape,
            dtype=dtype,
        )
    )
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_group_norm_is_drafted_as_the_template_and_correct(tmp_path, name: str) -> None:
    """Module and function forms, fp16 upcast, no affine, 1-D and 2-D spatial sizes, a span of
    19600 elements (longer than one block: the three-pass branch)."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.op_class == "normalization" and a.source is not None and "group_norm_kernel" in a.source, (
        a.summary
    )
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=2, trials=2))
    assert r.ok, r.message
