"""Checks the suite tests share."""

from __future__ import annotations

from typing import Any

import torch

from kegen.eval.loader import load_candidate, load_problem
from kegen.suites import SuiteProblem


def _floating(values: list[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]


def check_declared_dtype(p: SuiteProblem) -> None:
    """The problem's floating inputs and its reference's output have the manifest's dtype, the output
    is finite, and the seed imports and defines ModelNew."""
    problem = load_problem(p.problem_path)
    torch.manual_seed(0)
    model = problem.model_cls(*problem.get_init_inputs())
    inputs = problem.get_inputs()
    assert _floating(inputs) and all(t.dtype == getattr(torch, p.dtype) for t in _floating(inputs))
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and out.dtype == getattr(torch, p.dtype)
    assert torch.isfinite(out.float()).all()
    assert isinstance(load_candidate(p.seed_path), type)
