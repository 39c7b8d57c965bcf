"""Weight-only quantized linear layers drafted as the dequant GEMM template (drafting/quant.py): the
integer weight read in the GEMM's loop, the scale applied to the accumulator, checked on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("qweight", torch.randint(-127, 128, (72, 80), dtype=torch.int8))
        self.register_buffer("scale", (torch.rand({scale_shape}) * 0.02 + 0.001).to({dtype}))
        self.bias = nn.Parameter(torch.randn(72).to({dtype}))

    def forward(self, x{extra_args}):
{body}


def get_inputs():
    return [torch.randn({x_shape}, dtype={dtype}){extra_inputs}]


def get_init_inputs():
    return []
"""

CASES = {
    # name: (body, scale shape, x shape, dtype, extra forward args, extra inputs)
    "matmul_row_scale": (
        "w = self.qweight.float() * self.scale.float()[:, None]\n        return (x.float() @ w.t()).to(x.dtype)",
        "72",
        "3, 20, 80",
        "torch.bfloat16",
        "",
        "",
    ),
    "linear_bias_gelu": (
        "w = self.qweight.to(x.dtype) * self.scale.unsqueeze(1)\n        return F.gelu(F.linear(x, w, self.bias))",
        "72",
        "33, 80",
        "torch.float16",
        "",
        "",
    ),
    "scale_in_epilogue_residual": (
        "return (x @ self.qweight.t().to(x.dtype)) * self.scale + r",
        "72",
        "33, 80",
        "torch.float32",
        ", r",
        ", torch.randn(33, 72)",
    ),
    "group_wise_scales": (
        "n, k = self.qweight.shape\n"
        "        w = (self.qweight.float().view(n, k // 16, 16) * self.scale.float().unsqueeze(-1)).view(n, k)\n"
        "        return (x.float() @ w.t()).to(x.dtype)",
        "72, 5",
        "2, 19, 80",
        "torch.float16",
        "",
        "",
    ),
    "scalar_scale_divided": (
        "w = self.qweight.float() / self.scale\n        return torch.relu(x.float() @ w.T).to(x.dtype)",
        "()",
        "17, 80",
        "torch.float16",
        "",
        "",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    body, scale_shape, x_shape, dtype, extra_args, extra_inputs = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(
        PROBLEM.format(
            body="        " + body,
            scale_shape=scale_shape,
            x_shape=x_shape,
            dtype=dtype,
            extra_args=extra_args,
            extra_inputs=extra_inputs,
        )
    )
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_linear_is_drafted_as_the_dequant_template_and_correct(tmp_path, name: str) -> None:
    """Ragged sizes (72 x 80 weight), 2-D and 3-D activations, per-channel, group-wise (16 input
    channels a scale) and scalar scales, a bias, an activation and a residual in the epilogue."""
    problem = _problem(tmp_path, name)
    a = analyze(problem)
    assert a.op_class == "matmul" and a.source is not None, a.summary
    assert "dequant_linear_kernel" in a.source and "self.reference.get_buffer('qweight')" in a.source
    assert ".to(a.dtype)" in a.source  # the integers converted in the tile, no float weight
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=5, trials=2))
    assert r.ok, r.message


def test_float_weights_and_wide_scales_are_left_to_other_drafters(tmp_path) -> None:
    """A float weight is a plain matmul; a scale along K (one per input channel) cannot move to the
    accumulator: neither is drafted as a dequant GEMM (Inductor's draft covers both)."""
    text = _problem(tmp_path, "matmul_row_scale").read_text()
    float_w = tmp_path / "float_w.py"
    float_w.write_text(
        text.replace("torch.randint(-127, 128, (72, 80), dtype=torch.int8", "torch.randn((72, 80)")
    )
    wide = tmp_path / "wide.py"
    wide.write_text(text.replace("torch.rand(72)", "torch.rand(80)").replace("[:, None]", "[None, :]"))
    for path in (float_w, wide):
        a = analyze(path)
        assert a.source is None or "dequant_linear_kernel" not in a.source, path.name


def test_gpu_gemm_rewrites_leave_the_dequant_kernel_alone(tmp_path) -> None:
    """The GPU GEMM rewrites load operands as stored; on the int8 weight every one failed to compile
    (H100, 6 of 6 evaluations), so they do not match a kernel that converts an operand after loading."""
    from kegen.search.operators.mutations.gpu_moves import gpu_mutations

    a = analyze(_problem(tmp_path, "matmul_row_scale"))
    assert a.source is not None
    assert not [m for m in gpu_mutations(a.source) if "GEMM" in m.description]
