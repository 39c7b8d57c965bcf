"""Convolution chains drafted as the conv seed (drafting/conv.py, templates/conv/seed.py): strided and
dilated convolutions, F.conv1d/F.conv2d on parameters with fp32 upcasts, and an eval-mode BatchNorm
and a ReLU or SiLU after the convolution; then the mtia rewrites (conv_rows, conv_stationary) and the
GPU rewrite (gpu_conv, in Triton's interpreter) of that draft, each checked numerically."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from kegen.search.operators.templates import gpu_conv
from kegen.search.operators.templates.conv.rows import conv_mutations
from kegen.search.operators.templates.conv.stationary import stationary_mutations
from kegen.search.operators.templates.gpu_conv import ConvConfig
from lowering.backend.driver import MtiaDriver
from tests.search.test_gpu_templates import _run

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {params}):
{forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def _indent(text: str) -> str:
    return "\n".join(f"        {ln}" for ln in textwrap.dedent(text).strip().splitlines())


def _problem(tmp_path: Path, name: str, init: str, forward: str, inputs: str) -> Path:
    path = tmp_path / f"{name}.py"
    params = "x, identity" if "identity" in forward else "x"
    if "identity" in forward:  # the identity has the output's shape: the convolution keeps the input's
        inputs += ", " + inputs
    path.write_text(TEMPLATE.format(init=_indent(init), forward=_indent(forward), inputs=inputs, params=params))
    return path


# name -> (init, forward, inputs, activation the draft names, whether a BatchNorm is folded)
CHAINS = {
    "stride2_bn_relu_fp32": (
        """
        self.conv = nn.Conv2d(12, 24, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(24)
        with torch.no_grad():  # running statistics no seeded constructor reproduces
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)
        """,
        "return torch.relu(self.bn(self.conv(x)))",
        "torch.randn(2, 12, 13, 11)",
        "relu",
        True,
    ),
    "functional_fp16_upcast_dilated": (
        "self.w = nn.Parameter(torch.randn(16, 8, 3, 3, dtype=torch.float16) * 0.1)\n"
        "self.b = nn.Parameter(torch.randn(16, dtype=torch.float16))",
        "y = F.conv2d(x.float(), self.w.float(), self.b.float(), stride=(2, 1), padding=2, dilation=2)\n"
        "return y.to(x.dtype)",
        "torch.randn(1, 8, 15, 18, dtype=torch.float16)",
        "none",
        False,
    ),
    "conv1d_bias_bn_silu": (
        "self.conv = nn.Conv1d(8, 16, 5, padding=2)\nself.bn = nn.BatchNorm1d(16, affine=False)\n"
        "self.act = nn.SiLU()",
        "return self.act(self.bn(self.conv(x)))",
        "torch.randn(2, 8, 37)",
        "silu",
        True,
    ),
    "bn_relu6_fp32": (
        "self.conv = nn.Conv2d(8, 16, 3, padding=1)\nself.bn = nn.BatchNorm2d(16)\nself.act = nn.ReLU6()",
        "return self.act(self.bn(self.conv(x)))",
        "torch.randn(1, 8, 9, 10) * 4",
        "relu6",
        True,
    ),
    "gelu_fp32": (
        "self.conv = nn.Conv1d(8, 16, 3, stride=2)",
        "return F.gelu(self.conv(x))",
        "torch.randn(2, 8, 33)",
        "gelu",
        False,
    ),
    "hardswish_fp16": (
        "self.conv = nn.Conv2d(8, 16, 1).half()\nself.act = nn.Hardswish()",
        "return self.act(self.conv(x))",
        "torch.randn(1, 8, 7, 9, dtype=torch.float16) * 3",
        "hardswish",
        False,
    ),
    "resnet_block_tail_fp32": (  # relu(bn(conv(x)) + identity), the identity a second input
        "self.conv = nn.Conv2d(16, 16, 3, padding=1, bias=False)\nself.bn = nn.BatchNorm2d(16)",
        "return torch.relu(self.bn(self.conv(x)) + identity)",
        "torch.randn(2, 16, 9, 11)",
        "relu",
        True,
    ),
    "residual_of_its_input_fp16": (
        "self.conv = nn.Conv2d(8, 8, 3, padding=1).half()",
        "return F.silu(x + self.conv(x))",
        "torch.randn(1, 8, 10, 12, dtype=torch.float16)",
        "silu",
        False,
    ),
    "sequential_same_bn_silu": (  # nn.Sequential's modules, padding="same" (numbers in the draft)
        "self.block = nn.Sequential(\n    nn.Conv2d(8, 16, 3, padding='same', bias=False), nn.BatchNorm2d(16), nn.SiLU()\n)",
        "return self.block(x)",
        "torch.randn(2, 8, 10, 11)",
        "silu",
        True,
    ),
}


def _draft(tmp_path: Path, case: str) -> tuple[Path, str]:
    init, forward, inputs, act, bn = CHAINS[case]
    problem = _problem(tmp_path, case, init, forward, inputs)
    a = analyze(problem)
    assert a.op_class == "convolution" and a.source is not None and "kegen_conv_seed_kernel" in a.source
    declared = [ln for ln in a.source.splitlines() if "self.kegen_conv_epilogue = " in ln]
    assert (f", {act!r}" in "".join(declared)) == (act != "none")
    residual = "resnet_block_tail_fp32", "residual_of_its_input_fp16"
    assert ("".join(declared).count(",") == 2) == (case in residual)  # (bn, act, residual argument)
    assert ("self.kegen_conv_epilogue = ('reference." in a.source) == bn  # the BatchNorm's path
    return problem, a.source


@needs_mtia
@pytest.mark.parametrize("case", sorted(CHAINS))
def test_a_conv_chain_is_drafted_and_its_rewrites_are_correct_on_the_simulator(tmp_path, case: str) -> None:
    problem, source = _draft(tmp_path, case)
    rows, stationary = conv_mutations(source), stationary_mutations(source)
    assert rows and stationary  # the mtia moves take the draft
    cfg = EvalConfig(target="mtia", seed=5, trials=2)
    for candidate in (source, rows[0].apply(source), stationary[0].apply(source)):
        r = evaluate(str(problem), candidate, config=cfg)
        assert r.ok, r.message


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_the_gpu_rewrite_of_a_conv_chain_is_exact_in_the_interpreter(tmp_path, case: str) -> None:
    problem, source = _draft(tmp_path, case)
    out = gpu_conv.rewrite(source, ConvConfig(32, 16, 16, 2, 4, 2))
    _run("check", str(problem), out, tmp_path, atol=2e-2)


DEPTHWISE = {
    "dw_bn_relu_fp32": (
        """
        self.dw = nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24, bias=False)
        self.bn = nn.BatchNorm2d(24)
        with torch.no_grad():
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)
        """,
        "return F.relu(self.bn(self.dw(x)))",
        "torch.randn(2, 24, 13, 11)",
    ),
    "dw_residual_gelu_fp32": (
        "self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)",
        "return F.gelu(self.dw(x) + identity)",
        "torch.randn(2, 16, 7, 9)",
    ),
    "dw_functional_fp16_silu": (
        "self.w = nn.Parameter(torch.randn(16, 1, 5, 5, dtype=torch.float16) * 0.2)",
        "return F.silu(F.conv2d(x.float(), self.w.float(), None, 1, 2, 1, 16)).to(x.dtype)",
        "torch.randn(1, 16, 12, 9, dtype=torch.float16)",
    ),
}


@needs_mtia
@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_a_depthwise_chain_is_drafted_as_the_stencil_and_is_correct(tmp_path, case: str) -> None:
    problem = _problem(tmp_path, case, *DEPTHWISE[case])
    a = analyze(problem)
    assert a.op_class == "convolution" and a.source is not None and "kegen_depthwise_kernel" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=4, trials=2))
    assert r.ok, r.message


def test_chains_the_seed_cannot_compute_are_not_drafted_as_it(tmp_path) -> None:
    """A grouped convolution, a BatchNorm before the convolution, a sum with something else than an
    input, a residual added after the activation, an activation the kernels do not have
    (tanh-approximated GELU) and asymmetric 'same' padding are left to the other drafters."""
    cases = {
        "grouped": ("self.conv = nn.Conv2d(8, 16, 3, groups=2)", "return self.conv(x)"),
        "bn_first": (
            "self.bn = nn.BatchNorm2d(8)\nself.conv = nn.Conv2d(8, 16, 3)",
            "return self.conv(self.bn(x))",
        ),
        "residual": ("self.conv = nn.Conv2d(8, 8, 3, padding=1)", "return self.conv(x) + x * 2"),
        "activation_before_residual": (
            "self.conv = nn.Conv2d(8, 8, 3, padding=1)",
            "return torch.relu(self.conv(x)) + x",
        ),
        "tanh_gelu": ("self.conv = nn.Conv2d(8, 16, 3)", "return F.gelu(self.conv(x), approximate='tanh')"),
        "same_but_asymmetric": (  # a 4-tap kernel: 'same' pads one side more than the other
            "self.w = nn.Parameter(torch.randn(8, 8, 4, 4))",
            "return F.conv2d(x, self.w, padding='same')",
        ),
    }
    for name, (init, forward) in cases.items():
        a = analyze(_problem(tmp_path, name, init, forward, "torch.randn(1, 8, 10, 10)"))
        assert a.source is None or "kegen_conv_seed_kernel" not in a.source, name
