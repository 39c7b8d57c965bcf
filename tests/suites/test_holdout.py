"""The hold-out suite: production-like problems the search's moves were not developed on (issue 26).

Its structure (manifest, declared dtypes, shapes unlike the production suite's) is checked here at
KEGEN_SUITE_SCALE=1/16; its searches are recorded by tools/record_production.py --suite holdout.
"""

from __future__ import annotations

import tomllib

import pytest

from kegen.eval.loader import load_problem
from kegen.suites import GEMM_CLASSES, SUITE_FILE, find_suite
from kegen.suites.interpreter import check_problems
from tests.suites.checks import check_declared_dtype

HOLDOUT = find_suite("holdout")
PRODUCTION = find_suite("production")
PROBLEMS = {p.name: p for p in HOLDOUT.problems}


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
    check_declared_dtype(PROBLEMS[name])


@pytest.mark.slow
def test_the_ragged_softmax_seed_matches_its_reference(small: None) -> None:
    (result,) = check_problems(HOLDOUT.root, ["softmax_fp16_1000"], sizes_mode="default", timeout_s=300)
    assert result.ok, result.message
