"""Honest kernels pass every check on every target (no false positives), with sane timings."""

from __future__ import annotations

import pytest
from eval_helpers import needs_mtia, quick, run_eval

from kegen.eval import Status

TARGETS = [pytest.param("mtia", marks=needs_mtia()), "cpu"]


@needs_mtia()
def test_honest_kernel_on_the_large_problem_stays_above_the_roofline() -> None:
    r = run_eval("vector_add_large", "vector_add_ok", quick("mtia"))
    assert r.status is Status.OK, r.message
    assert 0.1 < r.speedups["roofline"] < 1.0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "prob, cand",
    [
        ("vector_add", "vector_add_ok"),
        ("softmax", "softmax_ok"),
        ("matmul", "matmul_ok"),
        ("scale_bias", "scale_bias_ok"),
    ],
)
def test_honest_kernels_pass_every_check(prob: str, cand: str, target: str) -> None:
    r = run_eval(prob, cand, quick(target, trials=3))
    assert r.status is Status.OK, (r.status, r.message)
    assert r.fitness > 0
