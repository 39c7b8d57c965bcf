"""F.layer_norm on the model's own (upcast) parameters drafted as the LayerNorm template (drafting/norms.py)."""

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
        self.ln = nn.LayerNorm({n}).to(torch.float16)
{tweak}

    def forward(self, x):
        w, b = self.ln.weight.float(), self.ln.bias.float()
        return F.layer_norm(x.float(), ({n},), w, b, 1e-5).to(x.dtype)


def get_inputs():
    return [torch.randn(6, {n}, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def _problem(tmp_path: Path, tweak: str = "", n: int = 48) -> Path:
    path = tmp_path / "ln.py"
    path.write_text(PROBLEM.format(tweak=tweak, n=n))
    return path


@needs_mtia
@pytest.mark.parametrize("n", [48, 4100])
def test_layer_norm_on_upcast_parameters_is_drafted_and_correct(tmp_path, n: int) -> None:
    """Rows that fit a block (16 rows a program; 6 rows: a masked tile) and rows longer than the
    largest block (4096: the mean, variance and normalise passes)."""
    problem = _problem(tmp_path, n=n)
    a = analyze(problem)
    assert a.op_class == "normalization" and a.source is not None and "layer_norm_kernel" in a.source
    assert f"self.ln = nn.LayerNorm(({n},), eps=1e-05, bias=True).to(torch.float16)" in a.source
    assert f"BLOCK_SIZE = {64 if n == 48 else 4096}" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message


@needs_mtia
def test_parameters_construction_cannot_rebuild_are_read_from_the_reference(tmp_path) -> None:
    """Weights set in __init__ after construction: a twin LayerNorm would hold ones and zeros, so the
    draft builds the reference and reads its parameters (D70)."""
    tweak = "        with torch.no_grad():\n            self.ln.weight.uniform_(0.5, 1.5)"
    problem = _problem(tmp_path, tweak)
    a = analyze(problem)
    assert a.source is not None and "layer_norm_kernel" in a.source
    assert "self.reference = Reference(" in a.source and "nn.LayerNorm(" not in a.source.split("class ModelNew")[1]
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message
