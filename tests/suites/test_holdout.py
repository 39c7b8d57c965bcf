"""The hold-out suite: production-like problems the search's moves were not developed on (issue 26).

Its structure (manifest, declared dtypes, shapes unlike the production suite's) is checked here at
KEGEN_SUITE_SCALE=1/16; its searches are recorded by tools/record_production.py --suite holdout.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator

import pytest
import torch

from kegen.eval.loader import load_candidate, load_problem
from kegen.suites import GEMM_CLASSES, SUITE_FILE, find_suite
from kegen.suites.interpreter import check_problems

HOLDOUT = find_suite("holdout")
PRODUCTION = find_suite("production")
PROBLEMS = {p.name: p for p in HOLDOUT.problems}


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KEGEN_SUITE_SCALE", "0.0625")
    yield


def test_manifest_matches_the_folders_and_the_production_targets() -> None:
    entries = tomllib.loads((HOLDOUT.root / SUITE_FILE).read_text())["problem"]
    folders = {d.name for d in HOLDOUT.root.iterdir() if (d / "problem.py").is_file()}
    assert folders == {e["name"] for e in entries} == set(PROBLEMS)
    assert len(PROBLEMS) >= 10
    for p in HOLDOUT.problems:
        assert p.target == pytest.approx(0.80 if p.op_class in GEMM_CLASSES else 0.85), p.name
    # every op class of the production suite's GEMM, attention, norm, bag and conv problems is held out
    assert {p.op_class for p in HOLDOUT.problems} >= {"gemm", "attention", "normalization", "embedding",
                                                     "convolution"}


def test_no_problem_repeats_a_production_shape() -> None:
    production = {(p.op_class, p.dtype, tuple(sorted(load_problem(p.problem_path).size_constants.items())))
                  for p in PRODUCTION.problems}
    for p in HOLDOUT.problems:
        sizes = tuple(sorted(load_problem(p.problem_path).size_constants.items()))
        assert (p.op_class, p.dtype, sizes) not in production, p.name


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_inputs_and_reference_have_the_declared_dtype(name: str, small: None) -> None:
    p = PROBLEMS[name]
    problem = load_problem(p.problem_path)
    torch.manual_seed(0)
    model = problem.model_cls(*problem.get_init_inputs())
    inputs = problem.get_inputs()
    floating = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    assert floating and all(t.dtype == getattr(torch, p.dtype) for t in floating)
    with torch.no_grad():
        out = model(*inputs)
    assert out.dtype == getattr(torch, p.dtype) and torch.isfinite(out.float()).all()
    assert isinstance(load_candidate(p.seed_path), type)


@pytest.mark.slow
def test_the_ragged_softmax_seed_matches_its_reference(small: None) -> None:
    (result,) = check_problems(HOLDOUT.root, ["softmax_fp16_1000"], sizes_mode="default", timeout_s=300)
    assert result.ok, result.message
