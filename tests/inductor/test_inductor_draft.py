"""Inductor drafts: standalone candidates checked by kegen.eval on mtia; fake-tensor tracing; refusals."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from inductor_helpers import write_problem

from kegen.eval import EvalConfig, evaluate
from kegen.inductor.capture import CaptureError, capture
from kegen.inductor.draft import draft_from_inductor

CFG = EvalConfig(target="mtia", trials=1, profile=False, timing_runs=1)


def _check(path: Path) -> str:
    source, _ = draft_from_inductor(path)
    ast.parse(source)
    assert "torch._inductor" not in source and "triton_helpers" not in source  # standalone
    r = evaluate(path, source, config=CFG)
    assert str(getattr(r.status, "value", r.status)) == "ok", r.message
    return source


def test_elementwise_draft_is_correct_and_launches_with_an_explicit_grid(tmp_path) -> None:
    p = write_problem(tmp_path, "elu", "", "return torch.nn.functional.elu(x) * 2.0", "[torch.randn(8, 64)]")
    source = _check(p)
    assert "grid = (triton.cdiv(512," in source and "XBLOCK=" in source


def test_grouped_transposed_conv_with_batchnorm_uses_the_reference_weights(tmp_path) -> None:
    p = write_problem(
        tmp_path,
        "convt",
        "self.conv = nn.ConvTranspose2d(4, 4, 3, stride=2, groups=2)\n        self.bn = nn.BatchNorm2d(4)",
        "return torch.relu(self.bn(self.conv(x)))",
        "[torch.randn(1, 4, 4, 4)]",
    )
    source = _check(p)
    assert "class Reference(nn.Module)" in source and "kegen_convolution(" in source


@pytest.mark.slow
def test_scan_sort_and_attention_drafts_are_correct(tmp_path) -> None:
    # sort: Inductor's bitonic helpers use Triton constexpr functions (_log2) the draft must import
    _check(write_problem(tmp_path, "sort", "", "return torch.sort(x, dim=-1)[0]", "[torch.randn(4, 16)]"))
    _check(
        write_problem(
            tmp_path, "rcumsum", "", "return torch.cumsum(x.flip(1), 1).flip(1)", "[torch.randn(4, 32)]"
        )
    )
    _check(
        write_problem(
            tmp_path,
            "sdpa",
            "",
            "return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
            "[torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)]",
            args="q, k, v",
        )
    )


@pytest.mark.slow
def test_looped_reductions_of_variances_are_drafted_without_welford(tmp_path) -> None:
    # rows of 4096 are reduced in a loop; Inductor's Welford combine has no reduction-engine equivalent
    p = write_problem(
        tmp_path, "ln", "self.ln = nn.LayerNorm(4096)", "return self.ln(x)", "[torch.randn(2, 4096)]"
    )
    assert "triton_red_" in _check(p)


def test_capture_traces_with_fake_tensors_without_allocating_the_inputs(tmp_path) -> None:
    # 2**37 floats (512 GiB) would be allocated if the reference ran at its size
    p = write_problem(tmp_path, "huge", "", "return torch.relu(x).sum(dim=1)", "[torch.randn(2**17, 2**20)]")
    t0 = time.perf_counter()
    cap = capture(p)
    assert "triton_" in cap.code and time.perf_counter() - t0 < 60


def test_an_op_left_on_the_host_is_refused_by_name(tmp_path) -> None:
    p = write_problem(tmp_path, "inv", "", "return torch.linalg.inv(x)", "[torch.randn(4, 4)]")
    with pytest.raises(CaptureError, match="linalg_inv"):
        draft_from_inductor(p)


def test_forward_arguments_named_like_inductors_inputs_are_bound_at_once(tmp_path) -> None:
    """A forward taking (arg1_1, arg0_1): Inductor's arg0_1 is the forward's arg1_1 and vice versa."""
    p = tmp_path / "swapped.py"
    p.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, arg1_1, arg0_1):\n"
        "        return arg1_1 * 2 + arg0_1\n"
        "def get_inputs():\n    return [torch.randn(4, 8), torch.randn(4, 8)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert "arg0_1, arg1_1, = arg1_1, arg0_1," in _check(p)


def test_capture_keeps_the_post_grad_graph_and_each_kernels_nodes(tmp_path) -> None:
    p = write_problem(
        tmp_path,
        "lin",
        "self.l = nn.Linear(8, 8)",
        "return torch.relu(self.l(x)) * 2.0",
        "[torch.randn(4, 8)]",
    )
    cap = capture(p, keep_graph=True)
    names = {n.name for n in cap.post_grad.graph.nodes}
    kinds = [k for k, _ in cap.kernel_nodes]
    assert any("addmm" in k for k in kinds) and any(k.startswith("triton_") for k in kinds)
    assert all(set(nodes) <= names for _, nodes in cap.kernel_nodes)
    assert capture(p).post_grad is None  # kept only when asked
