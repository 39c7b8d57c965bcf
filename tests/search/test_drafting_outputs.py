"""Kernel groups with several outputs (drafting/output_views.py): a fused projection's q/k/v split,
the residual sum returned beside its LayerNorm or RMSNorm. Each draft is checked on the simulator
against the reference, every output compared."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kegen.search.operators.drafting import analyze
from kegen.search.operators.drafting.graph import trace
from kegen.search.operators.drafting.output_views import View, apply, expression
from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia
from tests.search.test_drafting_aten import PROBLEM

A = "torch.ops.aten"
CASES = {
    # name: (forward args, body, get_inputs, op class, a text the draft must hold)
    # Inductor's fused q/k/v projection: one addmm, its result split into three head-major views
    "qkv_split": (
        "bias, x, w",
        f"""        wt = {A}.as_strided.default(w, [32, 96], [1, 32], 0)
        y = {A}.addmm.default(bias, x, wt)
        v = {A}.reshape.default({A}.reshape.default(y, [2, 24, 96]), [2, 24, 3, 4, 8])
        parts = {A}.unbind.int({A}.permute.default(v, [2, 0, 3, 1, 4]))
        return (parts[0], parts[1], parts[2])""",
        "torch.randn(96), torch.randn(48, 32), torch.randn(96, 32)",
        "matmul",
        ".select(0, 2)",
    ),
    # the same split through aten.split (narrow views) of a bias-free projection
    "split_halves": (
        "x, w",
        f"""        y = {A}.mm.default(x, w)
        parts = {A}.split.Tensor(y, 40, 1)
        return (parts[0], parts[1])""",
        "torch.randn(24, 16), torch.randn(16, 80)",
        "matmul",
        ".narrow(1, 40, 40)",
    ),
    # a transformer block's residual LayerNorm: the sum and its norm, both returned
    "residual_layer_norm": (
        "x, r, w, b",
        f"""        h = {A}.add.Tensor(x, r)
        vm = {A}.var_mean.correction(h, [2], correction=0, keepdim=True)
        c = {A}.sub.Tensor(h, vm[1])
        n = {A}.mul.Tensor(c, {A}.rsqrt.default({A}.add.Tensor(vm[0], 1e-05)))
        y = {A}.add.Tensor({A}.mul.Tensor(n, w), b)
        return (h, {A}.reshape.default(y, [40, 48]))""",
        "torch.randn(2, 20, 48), torch.randn(2, 20, 48), torch.randn(48), torch.randn(48)",
        "normalization",
        "STORE_SUM=True",
    ),
    # Llama's residual RMSNorm: the norm returned twice (two consumers) after the sum
    "residual_rms_norm": (
        "x, r, w",
        f"""        h = {A}.add.Tensor(x, r)
        m = {A}.mean.dim({A}.pow.Tensor_Scalar(h, 2), [-1], True)
        y = {A}.mul.Tensor({A}.mul.Tensor(h, {A}.rsqrt.default({A}.add.Tensor(m, 1e-06))), w)
        return (h, {A}.reshape.default(y, [36, 40]), {A}.reshape.default(y, [36, 40]))""",
        "torch.randn(3, 12, 40), torch.randn(3, 12, 40), torch.randn(40)",
        "normalization",
        "STORE_SUM=True",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    args, body, inputs = CASES[name][:3]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(args=args, body=body, inputs=inputs))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_groups_with_several_outputs_are_drafted(tmp_path, name: str) -> None:
    op_class, marker = CASES[name][3:]
    assert_draft_correct_on_mtia(_problem(tmp_path, name), op_class, marker)


TORCH_LEVEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)

    def forward(self, x, r):
        h = x + r
        return {ret}


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(4, 50, 64), torch.randn(4, 50, 64)]


def get_init_inputs():
    return []
"""


@needs_mtia
def test_a_residual_norm_written_in_torch_returns_both_in_its_order(tmp_path) -> None:
    """The norm first, then the sum; F.layer_norm with the module's parameters."""
    path = tmp_path / "p.py"
    path.write_text(TORCH_LEVEL.format(ret="F.layer_norm(h, (64,), self.norm.weight, self.norm.bias), h"))
    source = assert_draft_correct_on_mtia(path, "normalization", "STORE_SUM=True")
    assert "return (y.view(x.shape), s.view(x.shape))" in source


@pytest.mark.parametrize(
    "ret",
    [
        "F.layer_norm(h, (64,)), h * 2.0",  # the other output is not the sum
        "F.layer_norm(h, (64,)), x",  # an input returned
        "F.layer_norm(h, (64,)), F.layer_norm(x, (64,))",  # two norms
    ],
)
def test_other_second_outputs_are_not_drafted_as_a_residual_norm(tmp_path, ret: str) -> None:
    path = tmp_path / "p.py"
    path.write_text(TORCH_LEVEL.format(ret=ret))
    assert analyze(path).source is None


def test_the_views_leave_the_graph_and_come_back_in_forward(tmp_path) -> None:
    t = trace(_problem(tmp_path, "qkv_split"))
    assert t.out is not None and t.lifted.output_views is not None  # one computed tensor, three views
    assert [c[0] for c in t.lifted.output_views] == [0, 0, 0]
    assert t.lifted.output_views[1][1][-1] == View("select", (0, 1))
    t = trace(_problem(tmp_path, "residual_layer_norm"))
    assert t.out is None and len(t.outs) == 2  # the sum and the norm: two computed tensors
    assert t.lifted.output_views == ((0, ()), (1, (View("reshape", (40, 48)),)))
    views = ((0, (View("narrow", (1, 2, 2)),)), (1, (View("t"),)))
    assert expression("r", views) == "(r[0].narrow(1, 2, 2), r[1].t())"
    a, b = torch.arange(8.0).reshape(2, 4), torch.ones(2, 3)
    got = apply((a, b), views)
    assert torch.equal(got[0], a[:, 2:4]) and got[1].shape == (3, 2)


UPCAST_RESIDUAL_RMS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(48).to(torch.float16) + 0.5)

    def forward(self, x, residual):
        h = x.float() + residual.float()
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight.float()
        return y.to(x.dtype), h.to(x.dtype)


def get_inputs():
    torch.manual_seed(0)
    return [torch.randn(40, 48, dtype=torch.float16), torch.randn(40, 48, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


@needs_mtia
def test_the_suites_residual_rms_norm_with_upcasts_and_a_parameter(tmp_path) -> None:
    """Summed in fp32 and cast back, the norm first; the weight a parameter seeded construction cannot
    rebuild (read from the reference ModelNew builds)."""
    path = tmp_path / "p.py"
    path.write_text(UPCAST_RESIDUAL_RMS)
    source = assert_draft_correct_on_mtia(path, "normalization", "STORE_SUM=True")
    assert "self.reference.get_parameter('weight')" in source


@needs_mtia
def test_the_suites_residual_layer_norm_with_upcasts(tmp_path) -> None:
    """`h = x.float() + r.float()`, LayerNorm of h, both cast back: the sum first."""
    path = tmp_path / "p.py"
    path.write_text(
        UPCAST_RESIDUAL_RMS.replace(
            "y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight.float()",
            "y = torch.nn.functional.layer_norm(h, (48,), self.weight.float(), None, 1e-5)",
        ).replace("return y.to(x.dtype), h.to(x.dtype)", "return h.to(x.dtype), y.to(x.dtype)")
    )
    source = assert_draft_correct_on_mtia(path, "normalization", "STORE_SUM=True")
    assert "return (s.view(x.shape), y.view(x.shape))" in source
