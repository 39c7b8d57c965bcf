"""Transposed convolutions drafted per output phase (templates/conv/transpose.py), checked on the
simulated MTIA against torch at small ragged shapes: the geometries decoders use and the odd ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = {module}

    def forward(self, x):
        return self.up(x)


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

# name -> (module, input)
CASES = {
    # a U-Net decoder's 2x upsampling: every phase one tap
    "unet_2x2_s2_fp16": ("nn.ConvTranspose2d(24, 16, 2, stride=2).half()", "torch.randn(2, 24, 5, 7).half()"),
    # a GAN/VAE decoder's 4x4 stride 2 padding 1: four taps a phase, rows and columns past the input
    "gan_4x4_s2_p1": ("nn.ConvTranspose2d(12, 20, 4, stride=2, padding=1)", "torch.randn(2, 12, 7, 9)"),
    # output padding, no bias: phases with one, two and four taps
    "k3_s2_outpad": (
        "nn.ConvTranspose2d(10, 6, 3, stride=2, padding=1, output_padding=1, bias=False)",
        "torch.randn(1, 10, 5, 6)",
    ),
    # different strides per axis, dilation, padding past the taps
    "dilated_mixed_stride": (
        "nn.ConvTranspose2d(8, 8, 3, stride=(1, 2), padding=(2, 0), dilation=2)",
        "torch.randn(2, 8, 6, 5)",
    ),
    # stride above the kernel: some phases take no tap (the bias alone)
    "stride_over_kernel": ("nn.ConvTranspose2d(6, 5, 2, stride=3)", "torch.randn(1, 6, 4, 3)"),
    # one tap per output pixel in 1-D (stride == kernel): the stacked-taps kernel
    "one_d_k2_s2": ("nn.ConvTranspose1d(20, 36, 2, stride=2)", "torch.randn(2, 20, 13)"),
    # 2x2 stride 2 with more output channels than one stacked tile takes
    "unet_many_channels": ("nn.ConvTranspose2d(8, 80, 2, stride=2)", "torch.randn(1, 8, 3, 70)"),
    "one_d": (
        "nn.ConvTranspose1d(16, 24, 5, stride=3, padding=2, output_padding=1)",
        "torch.randn(3, 16, 11)",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    module, inputs = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(module=module, inputs=inputs))
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_transposed_convolution_is_drafted_per_phase_and_is_correct(tmp_path: Path, name: str) -> None:
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.op_class == "convolution" and a.source is not None, a.summary
    assert "kegen_conv_transpose_kernel" in a.source and "RH=rh, RW=rw" in a.source
    assert "kegen_conv_transpose_tiles_kernel[grid]" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=4, trials=2))
    assert r.ok, f"{name}: {r.status} {r.message}"


def test_grouped_transposed_convolution_is_refused_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "grouped.py"
    path.write_text(
        PROBLEM.format(
            module="nn.ConvTranspose2d(8, 8, 2, stride=2, groups=2)", inputs="torch.randn(1, 8, 4, 4)"
        )
    )
    a = analyze(path)
    assert a.source is None and any("groups" in u for u in a.unsupported), a.unsupported
