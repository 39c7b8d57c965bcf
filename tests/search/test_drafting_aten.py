"""Aten graphs (the problems `kegen tune` cuts a model into) lifted to torch-level ops and drafted
from kegen's templates (drafting/aten.py); each draft checked on the simulator against the aten
reference, with the inputs and output views the lift moved out of the graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.drafting import analyze
from kegen.search.operators.drafting.aten import Lifted, wrap
from kegen.search.operators.drafting.graph import trace
from tests.search.draft_check import assert_draft_correct_on_mtia, needs_mtia

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
{body}


def get_inputs():
    torch.manual_seed(0)
    return [{inputs}]


def get_init_inputs():
    return []
"""

A = "torch.ops.aten"
CASES = {
    # name: (forward args, body, get_inputs, template the draft must use)
    # Inductor's linear + GELU: weight read transposed through as_strided, reshapes around the epilogue
    "addmm_gelu": (
        "bias, x, w",
        f"""        wt = {A}.as_strided.default(w, [24, 40], [1, 24], 0)
        y = {A}.addmm.default(bias, x, wt)
        v = {A}.reshape.default(y, [2, 10, 40])
        h = {A}.mul.Tensor(v, 0.5)
        s = {A}.mul.Tensor(v, 0.7071067811865476)
        e = {A}.erf.default(s)
        o = {A}.add.Tensor(e, 1)
        g = {A}.mul.Tensor(h, o)
        return {A}.reshape.default(g, [20, 40])""",
        "torch.randn(40), torch.randn(20, 24), torch.randn(40, 24)",
        "matmul",
    ),
    # a projection plus a residual that arrives in the model's 3-D shape
    "addmm_residual_3d": (
        "bias, x, w, res",
        f"""        wt = {A}.as_strided.default(w, [24, 16], [1, 24], 0)
        y = {A}.addmm.default(bias, x, wt)
        v = {A}.reshape.default(y, [2, 10, 16])
        return {A}.add.Tensor(res, v)""",
        "torch.randn(16), torch.randn(20, 24), torch.randn(16, 24), torch.randn(2, 10, 16)",
        "matmul",
    ),
    # LayerNorm as Inductor decomposes it, then a view to 2-D
    "layer_norm_formula": (
        "x, w, b",
        f"""        vm = {A}.var_mean.correction(x, [2], correction=0, keepdim=True)
        var = vm[0]
        mean = vm[1]
        c = {A}.sub.Tensor(x, mean)
        r = {A}.rsqrt.default({A}.add.Tensor(var, 1e-05))
        n = {A}.mul.Tensor(c, r)
        y = {A}.add.Tensor({A}.mul.Tensor(n, w), b)
        return {A}.reshape.default(y, [12, 48])""",
        "torch.randn(3, 4, 48), torch.randn(48), torch.randn(48)",
        "layer_norm",
    ),
    # softmax as Inductor decomposes it (a classifier head's)
    "softmax_formula": (
        "x",
        f"""        m = {A}.amax.default(x, [1], True)
        e = {A}.exp.default({A}.sub.Tensor(x, m))
        return {A}.div.Tensor(e, {A}.sum.dim_IntList(e, [1], True))""",
        "torch.randn(6, 50)",
        "softmax",
    ),
    # RMSNorm written with ops, as Inductor keeps it (confirmed numerically by the RMSNorm pattern)
    "rms_norm_formula": (
        "x, w",
        f"""        m = {A}.mean.dim({A}.pow.Tensor_Scalar(x, 2), [-1], True)
        r = {A}.rsqrt.default({A}.add.Tensor(m, 1e-06))
        y = {A}.mul.Tensor({A}.mul.Tensor(x, r), w)
        return {A}.reshape.default(y, [64, 96])""",
        "torch.randn(4, 16, 96), torch.randn(96)",
        "rms_norm",
    ),
    # a strided convolution whose weight and bias are the group's inputs, then ReLU and a view
    "convolution_inputs": (
        "x, w, b",
        f"""        c = {A}.convolution.default(x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
        return {A}.reshape.default({A}.relu.default(c), [2, 8, 25])""",
        "torch.randn(2, 4, 10, 10), torch.randn(8, 4, 3, 3), torch.randn(8)",
        "convolution",
    ),
    # a depthwise 3x3 convolution on input weights, no bias
    "depthwise_inputs": (
        "x, w",
        f"""        return {A}.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 6)""",
        "torch.randn(1, 6, 9, 9), torch.randn(6, 1, 3, 3)",
        "convolution",
    ),
    # a convolution, then eval-mode BatchNorm as Inductor decomposes it (statistics as inputs), ReLU
    "convolution_batch_norm_inputs": (
        "x, w, b, mean, var, g, beta",
        f"""        m = {A}.as_strided.default(mean, [8, 1, 1], [1, 1, 1], 0)
        c = {A}.convolution.default(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        inv = {A}.mul.Tensor({A}.reciprocal.default({A}.sqrt.default({A}.add.Tensor(var, 1e-05))), 1)
        s = {A}.unsqueeze.default({A}.unsqueeze.default(inv, -1), -1)
        y = {A}.mul.Tensor({A}.mul.Tensor({A}.sub.Tensor(c, m), s), {A}.reshape.default(g, [8, 1, 1]))
        return {A}.relu.default({A}.add.Tensor(y, {A}.reshape.default(beta, [8, 1, 1])))""",
        "torch.randn(2, 4, 9, 9), torch.randn(8, 4, 3, 3), torch.randn(8), torch.randn(8), "
        "torch.rand(8) + 0.5, torch.randn(8), torch.randn(8)",
        "convolution",
    ),
    # an embedding lookup (Inductor's aten.embedding: the table first) of 2-D indices
    "embedding_inputs": (
        "table, idx",
        f"""        return {A}.embedding.default(table, idx)""",
        "torch.randn(50, 24), torch.randint(0, 50, (4, 6))",
        "gather",
    ),
    # a depthwise 1-D convolution on input weights (a conv transformer's token mixer)
    "depthwise_1d_inputs": (
        "x, w, b",
        f"""        return {A}.convolution.default(x, w, b, [1], [2], [1], False, [0], 12)""",
        "torch.randn(2, 12, 30), torch.randn(12, 1, 5), torch.randn(12)",
        "convolution",
    ),
    # a batched product whose second operand is a permuted view of a flat storage
    "bmm_flat_storage": (
        "a, storage",
        f"""        bt = {A}.as_strided.default(storage, [3, 16, 8], [128, 1, 16], 0)
        return {A}.bmm.default(a, bt)""",
        "torch.randn(3, 12, 16), torch.randn(384)",
        "matmul",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    args, body, inputs, _ = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(args=args, body=body, inputs=inputs))
    return path


@needs_mtia
@pytest.mark.parametrize("name", sorted(CASES))
def test_aten_graphs_are_drafted_from_templates(tmp_path, name: str) -> None:
    op_class = "normalization" if CASES[name][3].endswith("_norm") else CASES[name][3]
    assert_draft_correct_on_mtia(_problem(tmp_path, name), op_class)


def test_the_lift_reads_weights_and_views_as_written(tmp_path) -> None:
    """GELU and LayerNorm become F.gelu / F.layer_norm; a transposed weight a permute of the input;
    the reshapes leave the graph for the candidate's forward."""
    t = trace(_problem(tmp_path, "addmm_gelu"))
    names = [getattr(n.target, "__name__", n.target) for n in t.ops]
    assert names == ["permute", "mm", "add", "gelu"]
    assert t.lifted is not None and t.lifted.output_view is None  # [20, 40] is the mm's own shape
    t = trace(_problem(tmp_path, "addmm_residual_3d"))
    assert t.lifted.input_views == {3: (20, 16)} and t.lifted.output_view == (2, 10, 16)
    t = trace(_problem(tmp_path, "layer_norm_formula"))
    assert [getattr(n.target, "__name__", n.target) for n in t.ops] == ["layer_norm"]
    assert t.lifted.output_view == (12, 48)
    t = trace(_problem(tmp_path, "softmax_formula"))
    assert [getattr(n.target, "__name__", n.target) for n in t.ops] == ["softmax"]
    t = trace(_problem(tmp_path, "bmm_flat_storage"))
    assert t.lifted.input_views == {1: (3, 8, 16)}
    t = trace(_problem(tmp_path, "convolution_batch_norm_inputs"))
    assert [getattr(n.target, "__name__", n.target) for n in t.ops] == ["conv2d", "batch_norm", "relu"]


@pytest.mark.parametrize(
    "body",
    [
        # add with alpha: no exact operator form
        f"        return {A}.add.Tensor(x, w, alpha=2)",
        # a view of part of the storage (a slice of a fused weight)
        f"        return {A}.mm.default(x, {A}.as_strided.default(w, [4, 4], [1, 4], 4))",
        # an op the lift does not know
        f"        return {A}.cumsum.default(x, 1)",
        # a transposed convolution
        f"        return {A}.convolution.default(x[None, None], w[None, None], None, [1, 1], [0, 0], [1, 1], "
        "True, [0, 0], 1)",
    ],
)
def test_unliftable_graphs_stay_aten_and_are_refused(tmp_path, body: str) -> None:
    path = tmp_path / "p.py"
    path.write_text(PROBLEM.format(args="x, w", body=body, inputs="torch.randn(4, 4), torch.randn(4, 4)"))
    t = trace(path)
    assert t.lifted is None
    a = analyze(path)
    assert a.source is None and a.unsupported


def test_wrap_applies_the_views_in_forward() -> None:
    source = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a\n"
    wrapped = wrap(source, ["a", "b"], Lifted({1: (6, 4)}, (2, 3, 4)))
    assert "class _ModelNewLifted(nn.Module)" in wrapped
    assert "super().forward(a, b.reshape(6, 4)).reshape(2, 3, 4)" in wrapped
    assert wrap(source, ["a", "b"], Lifted()) == source
