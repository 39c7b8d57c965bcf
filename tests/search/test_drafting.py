"""Drafting the first candidate from the reference: recognition of the op classes, and each drafted
candidate evaluated on the simulated MTIA (real Triton backend, real simulator, tiny shapes)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import DraftError, analyze, draft_candidate
from tests.search.search_helpers import ROOT

FIXTURES = Path(__file__).parent / "fixtures_drafting"
SUITE = ROOT / "kegen" / "suites" / "default"
QUICK = EvalConfig(
    target="mtia",
    trials=2,
    timing_runs=1,
    warmup_ms=1.0,
    rep_ms=1.0,
    profile=False,
    compile_baseline=False,
    timeout_s=240.0,
)

# fixture -> (op class, a fragment the draft must contain)
DRAFTED = {
    "mlp_sequential": ("matmul", "linear_kernel_1"),
    "linear_functional": ("matmul", "HAS_BIAS=bias is not None"),
    "bmm_transposed": ("matmul", "k.transpose(-1, -2)"),
    "matmul_fold": ("matmul", "b3 = b.unsqueeze(0)"),
    "gemm_fp16": ("matmul", "dtype=torch.float16"),
    "matmul_bias_residual": ("matmul", "bias.contiguous(), residual.contiguous()"),
    "scale_bias_params": ("elementwise", "self.bias = nn.Parameter(torch.zeros((100,)))"),
    "layer_norm_residual": ("normalization", "HAS_RESIDUAL=True"),
    "rms_norm_formula": ("normalization", "rms_norm_kernel"),
    "rms_norm_module": ("normalization", "nn.RMSNorm((100,), eps=1e-05"),
    "broadcast_bias": ("elementwise", "[:, None]"),
    "cumsum": ("scan", "tl.cumsum"),
    "argmax": ("reduction", "argmax_kernel"),
    "col_mean": ("reduction", "col_reduce_kernel"),
    "embedding_module": ("gather", "self.emb = nn.Embedding(50, 72)"),
    "embedding_param": ("gather", "self.table = nn.Parameter(torch.randn((50, 72)))"),
    "transpose": ("elementwise", "transpose_kernel"),
    "log_softmax": ("softmax", "tl.log"),
    "log_softmax_channels": ("softmax", "LOG=True"),
    "softmax_long_dim0": ("softmax", "softmax_cols_kernel"),
    "linear_matmul_param_bf16": ("matmul", "h = _linear(linear_kernel_0, h, self.reference.get_parameter('weight'), None)"),
    "linear_matmul_kn": ("matmul", "self.reference.get_parameter('w').t()"),
    "gated_mlp_params": ("matmul", "y1 = _linear_kernel_1(h, self.reference.get_parameter('w3'), None, y0"),
    "geglu_chunk": ("matmul", "self.proj.weight.detach()[40:80], self.proj.bias.detach()[40:80]"),
    "swiglu_sliced": ("matmul", "y1 = _linear_kernel_1(h, self.gate_up.weight.detach()[48:96], None, y0"),
    "two_projections_summed": ("matmul", "y2 = _linear(linear_kernel_0, y1, self.c.weight.detach()"),
    "two_inputs_projected": ("matmul", "y1 = _linear_kernel_1(y_in, self.b.weight.detach()"),
    "chunk_three_ways": ("matmul", "self.proj.weight.detach()[32:48]"),
    "linear_heads_split": ("matmul", "return result.reshape(2, 24, 4, 16).transpose(1, 2)"),
    "qkv_unbind": ("matmul", ".permute(2, 0, 3, 1, 4).select(0, 2))"),
    "softmax_viewed": ("softmax", "return result.reshape(2, 3, 10, 40)"),
    "linear_residual_bf16": ("matmul", "residual.reshape(-1, residual.shape[-1]).contiguous()"),
    "linear_stack_scales": ("matmul", "def _linear_kernel_1(x, weight, bias, e0, e1, e2):"),
    "linear_clamps": ("matmul", "tl.minimum(tl.maximum(t1, -0.5), 2.0)"),
    "linear_inplace_clamp": ("matmul", "tl.minimum(tl.maximum(acc, -0.5), 0.75)"),
}


@pytest.mark.parametrize("name", sorted(DRAFTED))
def test_drafted_candidate_is_correct_on_the_simulator(name: str) -> None:
    path = FIXTURES / f"{name}.py"
    source, analysis = draft_candidate(path)
    op_class, fragment = DRAFTED[name]
    assert analysis.op_class == op_class, analysis.summary
    assert fragment in source
    result = evaluate(path, source, config=QUICK)
    assert result.status.value == "ok", f"{name}: {result.status} {result.message}"
    assert result.target == "mtia" and result.trials >= 2


def test_a_wrong_draft_is_caught_so_the_checks_above_mean_something() -> None:
    path = FIXTURES / "cumsum.py"
    source, _ = draft_candidate(path)
    exclusive = source.replace("tl.cumsum(x, axis=1) + carry", "tl.cumsum(x, axis=1) - x + carry")
    assert exclusive != source
    result = evaluate(path, exclusive, config=QUICK)
    assert result.status.value == "incorrect"


@pytest.mark.parametrize(
    ("problem", "op_class"),
    [
        ("mlp_bias_relu", "matmul"),
        ("batched_gemm", "matmul"),
        ("gemm", "matmul"),
        ("gemm_fp16", "matmul"),
        ("layer_norm", "normalization"),
        ("add_layer_norm", "normalization"),
        ("rms_norm_fwd", "normalization"),
        ("cumsum", "scan"),
        ("argmax", "reduction"),
        ("col_mean", "reduction"),
        ("transpose", "elementwise"),
        ("gelu", "elementwise"),
        ("silu_bf16", "elementwise"),
    ],
)
def test_bench_suite_problems_are_recognised(problem: str, op_class: str) -> None:
    a = analyze(SUITE / problem / "problem.py")
    assert a.op_class == op_class, a.summary
    ast.parse(a.source or "")


PROBLEM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, {args}):
        return {expr}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return []
"""


def _problem(tmp_path: Path, expr: str, inputs: str, args: str = "x", init: str = "") -> Path:
    p = tmp_path / f"p{abs(hash((expr, inputs, init)))}.py"
    p.write_text(PROBLEM.format(expr=expr, inputs=inputs, args=args, init=textwrap.indent(init, " " * 8)))
    return p


@pytest.mark.parametrize(
    ("expr", "args", "inputs", "op_class"),
    [
        (
            "x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w",
            "x, w",
            "torch.randn(4, 8), torch.rand(8)",
            "normalization",
        ),
        (
            "w * (x * torch.rsqrt(torch.square(x).mean(dim=-1, keepdim=True) + 1e-6))",
            "w, x",
            "torch.rand(8), torch.randn(4, 8)",
            "normalization",
        ),
        ("F.rms_norm(x, (8,), eps=1e-6)", "x", "torch.randn(4, 8)", "normalization"),
        ("x.T", "x", "torch.randn(4, 8)", "elementwise"),
        ("x.permute(1, 0).contiguous()", "x", "torch.randn(4, 8)", "elementwise"),
        ("x.transpose(-1, -2).contiguous()", "x", "torch.randn(2, 4, 8)", "elementwise"),
        ("F.relu(x, inplace=False) + 1.0", "x", "torch.randn(4, 8)", "elementwise"),
        ("x * y", "x, y", "torch.randn(4, 8), torch.randn(4, 1)", "elementwise"),
        (
            "torch.clip(x, -1, 1) + x.clamp_max(0.5) * F.hardtanh(x, 0.0, 2.0)",
            "x",
            "torch.randn(4, 8)",
            "elementwise",
        ),
        ("x + y", "x, y", "torch.randn(2, 4, 8), torch.randn(8)", "elementwise"),
        ("x.log_softmax(-1)", "x", "torch.randn(4, 8)", "softmax"),
        ("x.argmax(dim=-1, keepdim=True)", "x", "torch.randn(4, 8)", "reduction"),
        ("x.cumsum(dim=1)", "x", "torch.randn(4, 8)", "scan"),
        ("x.amax(dim=0, keepdim=True)", "x", "torch.randn(4, 8)", "reduction"),
        ("torch.matmul(a, b.mT)", "a, b", "torch.randn(2, 4, 8), torch.randn(2, 5, 8)", "matmul"),
    ],
)
def test_recognised_forms(tmp_path: Path, expr: str, args: str, inputs: str, op_class: str) -> None:
    a = analyze(_problem(tmp_path, expr, inputs, args))
    assert a.op_class == op_class, (expr, a.summary)
    ast.parse(a.source or "")


def test_modules_and_parameters_are_rebuilt_in_construction_order(tmp_path: Path) -> None:
    init = "self.fc = nn.Linear(8, 4)\nself.scale = nn.Parameter(torch.rand(4))"
    a = analyze(_problem(tmp_path, "self.fc(x)", "torch.randn(3, 8)", init=init))
    assert a.op_class == "matmul", a.summary
    src = a.source or ""
    assert src.index("self.fc = nn.Linear(8, 4, bias=True)") < src.index(
        "self.scale = nn.Parameter(torch.rand((4,)))"
    )


@pytest.mark.parametrize(
    ("expr", "args", "inputs", "init"),
    [
        # looks like RMSNorm but is not: the numeric confirmation refuses it
        (
            "x * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w",
            "x, w",
            "torch.randn(4, 8), torch.randn(8)",
            "",
        ),
        ("torch.cumsum(x, dim=0)", "x", "torch.randn(4, 8)", ""),
        ("torch.argmax(x)", "x", "torch.randn(4, 8)", ""),
        ("torch.sum(x, dim=0)", "x", "torch.randn(2, 4, 8)", ""),
        ("x + y", "x, y", "torch.randn(2, 4, 8), torch.randn(2, 1, 8)", ""),  # a middle-dim broadcast
        # (x.transpose(0, 1).contiguous() of a 3-D x is no longer a lookalike: the layout copy drafts it, D59)
        ("x.transpose(1, 2).contiguous().transpose(0, 1).contiguous()", "x", "torch.randn(2, 4, 8)", ""),
        ("torch.matmul(a, b)", "a, b", "torch.randn(2, 4, 8), torch.randn(1, 8, 5)", ""),  # batch broadcast
        # a clamp in place on a value read again afterwards (the later read sees the clamped values)
        ("x.clamp_(min=0.0) + x", "x", "torch.randn(4, 8)", ""),
        # an epilogue tensor that broadcasts along a middle dim of the linear's output
        ("self.fc(x) + y", "x, y", "torch.randn(2, 4, 8), torch.randn(2, 1, 8)", "self.fc = nn.Linear(8, 8)"),
        # a layer's output sliced into overlapping parts, or chunked along its rows (not its columns)
        ("(h := self.fc(x))[..., :6] * h[..., 2:]", "x", "torch.randn(4, 8)", "self.fc = nn.Linear(8, 8)"),
        ("(p := self.fc(x).chunk(2, dim=0))[0] * p[1]", "x", "torch.randn(4, 8)", "self.fc = nn.Linear(8, 8)"),
        # a head split the reference copies (.contiguous() is a copy it pays, not a view to skip)
        ("self.fc(x).view(2, 4, 2, 4).transpose(1, 2).contiguous()", "x", "torch.randn(2, 4, 8)",
         "self.fc = nn.Linear(8, 8)"),
    ],
)
def test_lookalikes_are_refused(tmp_path: Path, expr: str, args: str, inputs: str, init: str) -> None:
    with pytest.raises(DraftError, match="--seed"):
        draft_candidate(_problem(tmp_path, expr, inputs, args, init))


@pytest.mark.parametrize(
    ("expr", "init", "weights"),
    [
        ("self.fc(x) + x", "self.fc = nn.Linear(8, 8)", "self.fc.weight.detach()"),
        # weights that seeded construction of nn.Linear would not rebuild in ModelNew: the reference's
        (
            "self.fc(x)",
            "self.fc = nn.Linear(8, 8)\nnn.init.zeros_(self.fc.bias)",
            "get_parameter('fc.weight')",
        ),
        (
            "self.fc(x)",
            "self.w = nn.Parameter(torch.randn(8) * 0.1)\nself.fc = nn.Linear(8, 8)",
            "get_parameter('fc.weight')",
        ),
    ],
)
def test_linear_weights_come_from_twins_or_the_reference(
    tmp_path: Path, expr: str, init: str, weights: str
) -> None:
    path = _problem(tmp_path, expr, "torch.randn(4, 8)", "x", init)
    source, analysis = draft_candidate(path)
    assert analysis.op_class == "matmul" and weights in source, analysis.summary
    assert evaluate(path, source, config=QUICK).status.value == "ok"


def test_the_refusal_names_the_missing_ops_and_the_graph(tmp_path: Path) -> None:
    p = _problem(tmp_path, "torch.flip(torch.cumsum(x, dim=-1), [0])", "torch.randn(4, 8)")
    with pytest.raises(DraftError) as err:
        draft_candidate(p)
    msg = str(err.value)
    assert "no Triton template for flip" in msg and "cumsum" in msg and "--operator llm" in msg


@pytest.mark.parametrize(
    "expr",
    [
        "x @ self.w.t()",
        "x @ self.w.T",
        "x @ self.w.transpose(0, 1)",
        "torch.mm(x, self.w.transpose(-1, -2))",
        "torch.matmul(x, self.w.permute(1, 0))",
        "torch.relu(x @ self.v)",  # a [K, N] weight kept as stored: read as v.t() through its strides
    ],
)
def test_products_with_a_weight_are_linear_layers(tmp_path: Path, expr: str) -> None:
    init = "self.w = nn.Parameter(torch.randn(6, 8) * 0.3)\nself.v = nn.Parameter(torch.randn(8, 6) * 0.3)"
    path = _problem(tmp_path, expr, "torch.randn(5, 8)", "x", init)
    source, analysis = draft_candidate(path)
    assert analysis.op_class == "matmul" and "linear_kernel_0" in source, analysis.summary
    assert evaluate(path, source, config=QUICK).status.value == "ok"
