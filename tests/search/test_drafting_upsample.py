"""Nearest-neighbour upsampling recognised numerically and drafted as the one-pass template
(drafting/upsample.py), checked on the simulator and in Triton's interpreter."""

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
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor={factor}, mode="{mode}")

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn({shape}, dtype={dtype})]


def get_init_inputs():
    return []
"""

CASES = {
    # name: (forward body, input shape, dtype, nn.Upsample factor, mode)
    "interpolate_2x_ragged": (
        'return F.interpolate(x, scale_factor=2, mode="nearest")',
        "2, 3, 5, 12",
        "torch.float16",
        2,
        "nearest",
    ),
    "module_1d_4x": ("return self.up(x)", "2, 3, 10", "torch.float32", 4, "nearest"),
    "repeat_rows_only": ("return x.repeat_interleave(2, dim=-2)", "3, 7, 16", "torch.float32", 2, "nearest"),
}


def _problem(tmp_path: Path, name: str) -> Path:
    body, shape, dtype, factor, mode = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(body=body, shape=shape, dtype=dtype, factor=factor, mode=mode))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_nearest_upsampling_is_drafted_and_exact(tmp_path, name: str) -> None:
    """2x of a 12-wide row (a 16-wide block, masked), 4x of a 1-D signal, rows repeated only."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.source is not None and "upsample_nearest_kernel" in a.source, a.summary
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message


@runs_gpu_templates
def test_upsampling_is_exact_in_tritons_interpreter(tmp_path) -> None:
    problem = _problem(tmp_path, "interpolate_2x_ragged")
    a = analyze(problem)
    assert a.source is not None
    assert_matches_in_interpreter(problem, a.source, tmp_path, "0")


def test_bilinear_is_not_taken_for_nearest(tmp_path) -> None:
    path = tmp_path / "bilinear.py"
    path.write_text(
        PROBLEM.format(
            body="return self.up(x)", shape="1, 2, 6, 8", dtype="torch.float32", factor=2, mode="bilinear"
        )
    )
    a = analyze(path)
    assert a.source is None or "upsample_nearest_kernel" not in a.source
