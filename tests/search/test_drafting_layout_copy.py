"""Views and one copy of an input (head split / merge, permutes of leading dims) drafted as the strided
row copy (drafting/layout.py), checked on the simulator and in Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver
from tests.search.interp_check import assert_matches_in_interpreter
from tests.triton_interpreter import runs_gpu_templates

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn({shape}, dtype={dtype})]


def get_init_inputs():
    return []
"""

CASES = {
    "head_split": (
        "b, s, _ = x.shape\n        return x.view(b, s, 3, 24).permute(0, 2, 1, 3).contiguous()",
        "2, 37, 72",
        "torch.float16",
    ),
    "head_merge": (
        "return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)",
        "2, 3, 37, 24",
        "torch.float32",
    ),
    "transpose_leading": ("return x.transpose(0, 1).contiguous()", "2, 4, 8", "torch.float32"),
    "permute_leading": ("return x.permute(2, 0, 1, 3).contiguous()", "3, 5, 7, 1500", "torch.float32"),
}


def _problem(tmp_path: Path, name: str) -> Path:
    body, shape, dtype = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(body=body, shape=shape, dtype=dtype))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_layout_copy_is_drafted_and_correct(tmp_path, name: str) -> None:
    """Ragged rows, an inner dim of 1500 (two column blocks of 1024), fp16 and fp32."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.source is not None and "strided_copy_kernel" in a.source, a.summary
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message


@runs_gpu_templates
def test_layout_copy_is_exact_in_tritons_interpreter(tmp_path) -> None:
    problem = _problem(tmp_path, "head_merge")
    a = analyze(problem)
    assert a.source is not None
    assert_matches_in_interpreter(problem, a.source, tmp_path, "0")


def test_a_last_dim_swap_and_pure_views_are_not_layout_copies(tmp_path) -> None:
    """A swap of the last dim is the transpose template's (strided columns); a reference that only
    views its input has no copy to draft."""
    swap = tmp_path / "swap.py"
    swap.write_text(
        PROBLEM.format(body="return x.permute(0, 2, 1).contiguous()", shape="2, 8, 16", dtype="torch.float32")
    )
    view = tmp_path / "view.py"
    view.write_text(PROBLEM.format(body="return x.view(2, 128)", shape="2, 8, 16", dtype="torch.float32"))
    for path in (swap, view):
        a = analyze(path)
        assert a.source is None or "strided_copy_kernel" not in a.source, path.name
