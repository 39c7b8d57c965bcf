"""The production suite's structure: manifest, problems, declared shapes and dtypes (no big shapes run).

Sizes are checked at the production scale by importing the problems (constants only); inputs and
references run at KEGEN_SUITE_SCALE=1/16, the scale knob the problems read.
"""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
import torch

from kegen.eval.loader import load_problem
from kegen.eval.trusted.roofline import problem_bytes, tensor_bytes
from kegen.suites import GEMM_CLASSES, SUITE_FILE, SuiteProblem, find_suite
from kegen.suites.interpreter import check_problems
from tests.suites.checks import check_declared_dtype

SUITE = find_suite("production")
PROBLEMS = {p.name: p for p in SUITE.problems}


def _sizes(p: SuiteProblem) -> dict[str, int]:
    return load_problem(p.problem_path).size_constants


def test_manifest_declares_op_class_kind_dtype_and_target_of_every_folder() -> None:
    data = tomllib.loads((SUITE.root / SUITE_FILE).read_text())
    entries = data["problem"]
    folders = {d.name for d in SUITE.root.iterdir() if (d / "problem.py").is_file()}
    assert folders == {e["name"] for e in entries} == set(PROBLEMS)
    for e in entries:
        assert {"op_class", "kind", "dtype", "target_roofline"} <= set(e), e["name"]
        assert e["dtype"] in ("float16", "bfloat16", "float32"), e["name"]
        expected = 0.80 if e["op_class"] in GEMM_CLASSES else 0.85
        assert PROBLEMS[e["name"]].target == pytest.approx(expected), e["name"]
    assert len(PROBLEMS) >= 15


def test_gemms_cover_512_to_4096_in_fp16_and_bf16_with_epilogues_and_batches() -> None:
    gemms = [p for p in SUITE.problems if p.op_class == "gemm"]
    squares = {(s["M"], p.dtype) for p in gemms if {"M", "N", "K"} <= set(s := _sizes(p)) and s["M"] == s["N"] == s["K"]}
    assert {n for n, _ in squares} >= {512, 1024, 2048, 4096}
    assert {p.dtype for p in gemms} >= {"float16", "bfloat16"}
    sources = {p.name: p.problem_path.read_text() for p in gemms}
    assert any("relu" in s for s in sources.values()) and any("gelu" in s for s in sources.values())
    assert any("bmm" in s and _sizes(PROBLEMS[n])["BATCH"] > 1 for n, s in sources.items())
    for p in gemms:
        dims = [v for k, v in _sizes(p).items() if k in ("M", "N", "K", "IN_FEATURES", "OUT_FEATURES")]
        assert dims and min(dims) >= 512 and max(dims) <= 4096, p.name


def test_memory_bound_problems_are_at_production_sizes() -> None:
    for name, p in PROBLEMS.items():
        s = _sizes(p)
        if p.op_class == "embedding":
            assert s["NUM_EMBEDDINGS"] >= 256 * 1024 and s["MAX_BAG"] >= 32, name
        if p.op_class == "jagged":
            assert s["NUM_SEGMENTS"] >= 512 and s["MAX_LEN"] >= 128, name
        if name.startswith(("layer_norm", "rms_norm")):
            assert (s["ROWS"], s["COLS"]) == (4096, 4096), name
        if name.startswith("softmax"):
            assert s["COLS"] >= 1024, name
        if p.op_class == "attention":
            assert s["SEQ"] >= 1024, name
        if p.op_class == "convolution":
            assert 64 <= s["IN_CHANNELS"] <= 256 and 64 <= s["OUT_CHANNELS"] <= 256, name
    names = " ".join(PROBLEMS)
    for needed in ("embedding_bag_sum", "embedding_bag_mean", "jagged_sum", "jagged_softmax", "jagged_to_padded",
                   "layer_norm", "rms_norm", "softmax", "attention", "conv1d", "conv2d"):
        assert needed in names


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_inputs_and_reference_have_the_declared_dtype_at_reduced_scale(name: str, small: None) -> None:
    check_declared_dtype(PROBLEMS[name])


@pytest.mark.parametrize("name", ["jagged_sum_fp32", "embedding_bag_mean_fp32"])
def test_jagged_lengths_are_long_tailed(name: str, small: None) -> None:
    problem = load_problem(PROBLEMS[name].problem_path)
    torch.manual_seed(1)
    offsets = problem.get_inputs()[-1]
    lengths = (offsets[1:] - offsets[:-1]).double()
    high = problem.size_constants.get("MAX_LEN") or problem.size_constants["MAX_BAG"]
    assert lengths.min() >= 0 and lengths.max() <= high
    assert lengths.median() < lengths.mean() < high / 3  # most short, a tail of long ones
    assert (lengths > high / 2).any()


def test_embedding_roofline_counts_the_rows_gathered_not_the_table(small: None) -> None:
    problem = load_problem(PROBLEMS["embedding_bag_sum_fp16"].problem_path)
    torch.manual_seed(2)
    model = problem.model_cls()
    weight, indices, offsets = problem.get_inputs()
    out = model(weight, indices, offsets)
    rows = int(torch.unique(indices).numel())
    expected = rows * weight.shape[1] * 2 + indices.numel() * 8 + offsets.numel() * 8 + out.numel() * 2
    assert problem_bytes(model, [weight, indices, offsets], out) == expected
    assert problem_bytes(model, [weight, indices, offsets], [out]) == expected  # outputs as a list too
    assert expected < tensor_bytes([weight, indices, offsets]) + tensor_bytes(out)
    assert problem_bytes(torch.nn.Identity(), [weight], out) == tensor_bytes([weight]) + tensor_bytes(out)


def test_roofline_counts_the_parameters_once() -> None:
    lin = torch.nn.Linear(8, 4)
    x, y = torch.zeros(2, 8), torch.zeros(2, 4)
    assert problem_bytes(lin, [x], y) == (16 + 8 + 32 + 4) * 4  # x, y, weight, bias


def test_a_problem_stating_a_bad_minimum_is_refused() -> None:
    class Broken(torch.nn.Module):
        def roofline_bytes(self, inputs: Any, outputs: Any) -> float:
            return 1.5

    with pytest.raises(ValueError, match="roofline_bytes returned 1.5"):
        problem_bytes(Broken(), [torch.zeros(4)], torch.zeros(4))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm_fp16_512", "jagged_to_padded_fp16"])
def test_seed_matches_its_reference_at_reduced_scale(name: str, small: None) -> None:
    (result,) = check_problems(SUITE.root, [name], sizes_mode="default", timeout_s=300)
    assert result.ok, result.message
