"""Max and average pooling drafted as kegen's pooling template (templates/conv/pool.py): windows,
strides and paddings of every path of the kernel (stride 1, a stride pair split, a wider stride
reduced over a third axis; count_include_pad either way; 1-D and 2-D) checked on the simulator at
ragged shapes, the options it does not cover refused, and one draft in Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import evaluate
from kegen.search.operators.drafting import analyze
from kegen.search.operators.templates.conv.pool import MARKER
from tests.search.interp_check import assert_matches_in_interpreter
from tests.search.test_drafting import QUICK, _problem
from tests.triton_interpreter import runs_gpu_templates

X4 = "torch.randn(2, 5, 13, 11{dtype})"
X3 = "torch.randn(2, 6, 17{dtype})"

CASES = {
    "max_3_s2_p1_fp16": ("self.pool(x)", X4, ", dtype=torch.float16", "self.pool = nn.MaxPool2d(3, 2, 1)"),
    "max_2x2": ("self.pool(x)", X4, "", "self.pool = nn.MaxPool2d(2)"),
    "max_stride_3_function": ("F.max_pool2d(x, (3, 2), stride=(2, 3))", X4, "", ""),
    "max_5_s4_p2": ("F.max_pool2d(x, 5, 4, 2)", X4, "", ""),
    "relu_then_max_fp16": ("F.max_pool2d(torch.relu(x), 3, 2, 1)", X4, ", dtype=torch.float16", ""),
    "scaled_then_avg": ("F.avg_pool2d(torch.sigmoid(x) * 2.0, 2)", X4, "", ""),
    "avg_3_s1_p1_valid_taps": (
        "self.pool(x)",
        X4,
        "",
        "self.pool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)",
    ),
    "avg_5_s3_p2_bf16": ("F.avg_pool2d(x, 5, 3, 2)", X4, ", dtype=torch.bfloat16", ""),
    "max_1d_3_s2_p1": ("self.pool(x)", X3, "", "self.pool = nn.MaxPool1d(3, stride=2, padding=1)"),
    "avg_1d_4": ("F.avg_pool1d(x, 4)", X3, "", ""),
}


def _case(tmp_path: Path, name: str) -> Path:
    expr, x, dtype, init = CASES[name]
    return _problem(tmp_path, expr, x.format(dtype=dtype), init=init)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pooling_drafts_are_correct_on_the_simulator(name: str, tmp_path: Path) -> None:
    path = _case(tmp_path, name)
    a = analyze(path)
    assert a.op_class == "reduction" and a.source is not None and MARKER in a.source, a.summary
    result = evaluate(path, a.source, config=QUICK)
    assert result.status.value == "ok", f"{name}: {result.status} {result.message}"


def test_a_window_one_column_short_is_caught(tmp_path: Path) -> None:
    """The check above means something: a 3-wide window read as 2 wide is wrong."""
    path = _case(tmp_path, "max_3_s2_p1_fp16")
    source = analyze(path).source or ""
    short = source.replace("KW=3,", "KW=2,")
    assert short != source
    assert evaluate(path, short, config=QUICK).status.value == "incorrect"


@pytest.mark.parametrize(
    "expr",
    [
        "F.max_pool2d(x, 3, 2, 1, ceil_mode=True)",
        "F.max_pool2d(x, 3, 1, 1, dilation=2)",
        "F.avg_pool2d(x, 2, divisor_override=3)",
        "F.max_pool2d(x, 3, 2) * 2",  # more than the pool: not this template's
    ],
)
def test_options_the_template_does_not_cover_are_left_to_other_drafts(expr: str, tmp_path: Path) -> None:
    a = analyze(_problem(tmp_path, expr, X4.format(dtype="")))
    assert MARKER not in (a.source or "")


@runs_gpu_templates
def test_pooling_draft_is_exact_in_tritons_interpreter(tmp_path: Path) -> None:
    path = _case(tmp_path, "max_stride_3_function")
    assert_matches_in_interpreter(path, analyze(path).source or "", tmp_path)


TUNED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(3, 2, 1)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 4, 12, 10)]


def get_init_inputs():
    return []
"""


def test_a_tuned_models_relu_and_max_pool_group_is_drafted_as_the_template(tmp_path: Path) -> None:
    """Inductor fuses the ReLU into its max pool (a low-memory prim, written as
    `aten.max_pool2d_with_indices` in the group's problem): the group lifts to relu + F.max_pool2d
    and drafts as the pooling template with the ReLU on each loaded tile, correct on the simulator."""
    from kegen.tune.capture import load_model_file, write_variant_problems
    from kegen.tune.kernels import plan_variant

    src = tmp_path / "conv_pool.py"
    src.write_text(TUNED)
    mf = load_model_file(src)
    (problem,) = write_variant_problems(mf, tmp_path / "problems")
    plan = plan_variant(mf, problem, 0, tmp_path / "groups")
    (group,) = [g for g in plan["groups"] if "max_pool2d" in g["kernel"]]
    a = analyze(Path(group["problem"]))
    assert a.source is not None and MARKER in a.source and "tl.maximum(v, 0.0)" in a.source, a.summary
    result = evaluate(group["problem"], a.source, config=QUICK)
    assert result.status.value == "ok", result.message
