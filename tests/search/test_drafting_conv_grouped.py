"""Grouped convolutions (1 < groups < channels) drafted as one program per group's channel block
(templates/conv/grouped.py), with the seed template's BatchNorm, activation and residual, and rows of
16 columns or more as weight-stationary runs (templates/conv/grouped_ws.py); each draft checked on the
simulator (the kernel its launch takes named) and its kernels compiled for an NVIDIA GPU (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from tests.search.test_drafting_conv_chain import _problem, needs_mtia

CASES = {
    # ResNeXt's grouped 3x3: 8 groups of 4 channels, BatchNorm and ReLU after it
    "resnext_bn_relu": (
        "self.conv = nn.Conv2d(32, 32, 3, padding=1, groups=8, bias=False)\nself.bn = nn.BatchNorm2d(32).eval()"
        "\nwith torch.no_grad():\n    self.bn.running_mean.uniform_(-0.5, 0.5)\n    self.bn.running_var.uniform_(0.5, 1.5)",
        "return torch.relu(self.bn(self.conv(x)))",
        "torch.randn(2, 32, 9, 9)",
    ),
    # wider groups than one channel block (48 output channels a group), strided, with bias
    "wide_groups_strided": (
        "self.conv = nn.Conv2d(24, 96, 3, stride=2, padding=1, groups=2)",
        "return self.conv(x)",
        "torch.randn(1, 24, 11, 10)",
    ),
    # 12 groups of 8 packed 8 to a program: the second program's pack holds 4 groups
    "partial_pack": (
        "self.conv = nn.Conv2d(96, 96, 3, padding=1, groups=12)",
        "return self.conv(x)",
        "torch.randn(1, 96, 7, 7)",
    ),
    # unit stride, rows of 20 columns: a program takes one row's columns (block reads; 12 lanes past the
    # row masked), a dilated 3x3 with BatchNorm and a residual add
    "row_tiles_residual": (
        "self.conv = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4, bias=False)"
        "\nself.bn = nn.BatchNorm2d(16).eval()",
        "return torch.relu(self.bn(self.conv(x)) + x)",
        "torch.randn(2, 16, 5, 20)",
    ),
    # 1-D, a channel multiplier inside each group (4 in, 12 out a group), fp16 (rows of 30 columns)
    "conv1d_fp16": (
        "self.conv = nn.Conv1d(16, 48, 5, padding=2, groups=4).half()",
        "return self.conv(x)",
        "torch.randn(2, 16, 30, dtype=torch.float16)",
    ),
    # 67 rows for one (image, pack): runs of two rows a program, the last run one row (weights stationary)
    "stationary_runs": (
        "self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=2)",
        "return self.conv(x)",
        "torch.randn(1, 8, 67, 16)",
    ),
    # groups wider than a channel block (80 output channels a group: two blocks), unit stride (stationary)
    "wide_groups_rows": (
        "self.conv = nn.Conv2d(24, 160, 3, padding=1, groups=2)",
        "return self.conv(x)",
        "torch.randn(1, 24, 4, 18)",
    ),
    # nine taps in a row: more than the stationary kernel unrolls, so the row kernel
    "wide_taps_rows": (
        "self.conv = nn.Conv1d(16, 16, 9, padding=4, groups=4)",
        "return torch.relu(self.conv(x))",
        "torch.randn(2, 16, 40)",
    ),
}
# the kernel each case's launch takes: weight-stationary runs of row tiles, the row kernel, or flattened
# pixels (rows narrower than 16 columns or strided)
KERNEL = {
    "resnext_bn_relu": "kegen_conv_grouped_kernel",
    "wide_groups_strided": "kegen_conv_grouped_kernel",
    "partial_pack": "kegen_conv_grouped_kernel",
    "row_tiles_residual": "kegen_conv_grouped_ws_kernel",
    "conv1d_fp16": "kegen_conv_grouped_ws_kernel",
    "stationary_runs": "kegen_conv_grouped_ws_kernel",
    "wide_groups_rows": "kegen_conv_grouped_ws_kernel",
    "wide_taps_rows": "kegen_conv_grouped_kernel",
}


def grouped_problem(tmp_path: Path, name: str) -> Path:
    init, forward, inputs = CASES[name]
    return _problem(tmp_path, name, init, forward, inputs)


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_convolution_is_drafted_and_correct(name: str, tmp_path: Path) -> None:
    problem = grouped_problem(tmp_path, name)
    a = analyze(problem)
    assert a.source is not None and a.op_class == "convolution", a.summary
    assert "kegen_conv_grouped_kernel[grid]" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message
    assert [k["name"] for k in r.profile["kernels"]] == [KERNEL[name]]


def test_groups_of_one_keep_the_seed_template(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "plain", "self.conv = nn.Conv2d(8, 16, 3, padding=1)", "return self.conv(x)",
                       "torch.randn(1, 8, 6, 6)")  # fmt: skip
    a = analyze(problem)
    assert a.source is not None and "kegen_conv_seed_kernel[grid]" in a.source and "grouped" not in a.source
