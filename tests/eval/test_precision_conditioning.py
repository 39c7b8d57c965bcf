"""The precision trial on an ill-conditioned reference: a float32 kernel in another order passes, fp16
arithmetic still fails (kegen/eval/trusted/precision.py)."""

from __future__ import annotations

import math

import pytest
import torch

from kegen.eval import EvalConfig, evaluate
from kegen.eval.trusted.checker import compare_outputs
from kegen.eval.trusted.precision import conditioned_comparison, offset_inputs, reference_error
from lowering.backend.driver import MtiaDriver


class _Attention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        w = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        return w.softmax(-1) @ v


def _inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return offset_inputs([torch.randn(1, 2, 256, 128, generator=g) for _ in range(3)])  # type: ignore[return-value]


def test_a_reordered_float32_attention_passes_and_fp16_fails() -> None:
    q, k, v = inputs = _inputs()
    ref = _Attention()
    ref_out = [ref(*inputs)]
    strict = EvalConfig(target="cpu")
    # the same attention in another order: the scale folded into q, exp2 with log2(e): exact float32
    s = (q * (q.shape[-1] ** -0.5 * math.log2(math.e))) @ k.transpose(-1, -2)
    p = torch.exp2(s - s.amax(-1, keepdim=True))
    reordered = [(p @ v) / p.sum(-1, keepdim=True)]
    assert reference_error(ref, inputs, ref_out, gpu=False) > 1e-5  # ill-conditioned at +16
    assert conditioned_comparison(ref, inputs, ref_out, reordered, strict, gpu=False) is not None
    half = [_Attention()(q.half(), k.half(), v.half()).float()]
    assert not compare_outputs(ref_out, half, strict).ok
    assert conditioned_comparison(ref, inputs, ref_out, half, strict, gpu=False) is None


class _Affine(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3.0 + 1.0


def test_a_well_conditioned_reference_gets_no_slack_worth_an_error() -> None:
    x = offset_inputs([torch.randn(64, 256)])
    ref = _Affine()
    out = [ref(x[0])]  # values near 49: float32 exact to ~3e-6
    assert reference_error(ref, x, out, gpu=False) < 1e-5
    off = [out[0] + 0.01]  # an error float32 cannot make here (tolerance 1e-4 + 1e-4 * 49)
    assert conditioned_comparison(ref, x, out, off, EvalConfig(target="cpu"), gpu=False) is None


@pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")
def test_the_fp32_attention_template_passes_the_precision_trial(tmp_path) -> None:
    from kegen.search.operators.drafting import analyze

    problem = tmp_path / "att.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, q, k, v):\n"
        "        return ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).softmax(-1) @ v\n\n\n"
        "def get_inputs():\n    return [torch.randn(1, 2, 256, 128) for _ in range(3)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    source = analyze(problem).source
    r = evaluate(str(problem), source, config=EvalConfig(target="mtia", seed=1, trials=1))
    assert r.ok, r.message
    assert r.details["precision_trial"] == "passed"
