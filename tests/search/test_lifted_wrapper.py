"""Moves on the drafts of `kegen tune` groups (operators/lifted_wrapper.py, gpu_conv.conv_module's
bound operands): whole-module rewrites see the drafted module inside the views the lift moved out,
and a convolution whose weight, bias and BatchNorm statistics are forward inputs is rewritten too.
Each rewrite is checked on the simulator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.profiling import Diagnosis
from kegen.search.config import OperatorConfig
from kegen.search.operators import lifted_wrapper
from kegen.search.operators.context import OperatorContext, ProblemInfo
from kegen.search.operators.drafting import analyze
from kegen.search.operators.offline import OfflineOperator
from kegen.search.operators.templates.conv.rows import conv_mutations
from kegen.search.store import Node, code_hash
from tests.search.draft_check import needs_mtia
from tests.search.test_drafting_aten import CASES, PROBLEM

A = "torch.ops.aten"


def _problem(tmp_path: Path, args: str, body: str, inputs: str) -> Path:
    path = tmp_path / "group.py"
    path.write_text(PROBLEM.format(args=args, body=body, inputs=inputs))
    return path


def _ctx(problem: Path, code: str) -> OperatorContext:
    node = Node(
        id=1, run_id="r", parent_id=None, depth=0, code=code, code_hash=code_hash(code), status="done",
        verdict="ok", score=1.0, speedup=1.0, is_bug=False, operator="seed", description="seed",
        target="mtia", island=0, visits=1, value_sum=1.0, created_at=0.0, evaluated_at=0.0,
    )  # fmt: skip
    info = ProblemInfo(path=problem, source=problem.read_text(), op_class="convolution")
    return OperatorContext(info, node, code, None, "optimize", Diagnosis(bound="latency"), None, [], [])


def test_split_and_rejoin_give_back_the_draft(tmp_path) -> None:
    problem = _problem(tmp_path, *CASES["convolution_inputs"][:3])
    source = analyze(problem).source
    assert source is not None
    parts = lifted_wrapper.split(source)
    assert parts is not None
    inner, wrapper = parts
    assert "class _ModelNewLifted(" not in inner and inner.count("class ModelNew(") == 1
    assert wrapper.lstrip().startswith("class ModelNew(_ModelNewLifted):")
    assert lifted_wrapper.rejoin(inner, wrapper) == source
    assert lifted_wrapper.split(inner) is None  # a plain module carries no wrapper


@needs_mtia
def test_the_offline_operator_rewrites_a_wrapped_conv_group_and_keeps_its_views(tmp_path) -> None:
    """A strided convolution group with an output view: the row-tiled rewrite applies (it found no
    __init__ on the wrapper before) and the rewritten candidate still returns the group's shape."""
    problem = _problem(tmp_path, *CASES["convolution_inputs"][:3])
    source = analyze(problem).source
    assert source is not None
    moves = OfflineOperator(OperatorConfig(), seed=0).candidates(_ctx(problem, source))
    rows = [m for m in moves if m.family == "conv_rows"]
    assert rows, sorted({m.family for m in moves})
    out = rows[0].apply(source)
    assert "class ModelNew(_ModelNewLifted):" in out and ".reshape(2, 8, 25)" in out
    r = evaluate(str(problem), out, config=EvalConfig(target="mtia", seed=5, trials=2))
    assert r.ok, r.message


@needs_mtia
def test_a_conv_with_bound_weights_and_batch_norm_statistics_takes_the_conv_moves(tmp_path) -> None:
    problem = _problem(tmp_path, *CASES["convolution_batch_norm_inputs"][:3])
    source = analyze(problem).source
    assert source is not None and "self.conv.bind(" in source
    moves = conv_mutations(source)
    assert moves
    r = evaluate(str(problem), moves[0].apply(source), config=EvalConfig(target="mtia", seed=5, trials=2))
    assert r.ok, r.message


def test_a_grouped_bound_convolution_is_not_rewritten(tmp_path) -> None:
    problem = _problem(tmp_path, *CASES["depthwise_inputs"][:3])
    source = analyze(problem).source
    assert source is not None and "kegen_depthwise_kernel" in source
    assert conv_mutations(source) == []


@pytest.mark.parametrize(
    ("init", "taken"),
    [
        ("self.conv = nn.Conv2d(16, 16, 3, 1, 1, 1)", True),  # dilation positional: groups left at 1
        ("self.conv = nn.Conv2d(16, 16, 3, 1, 1, 1, 2)", False),  # groups positional
        ("self.conv = ConvOperands(8, (3, 3), (1, 1), (1, 1), (1, 1), 1)", True),
        ("self.conv = ConvOperands(8, (3, 3), (1, 1), (1, 1), (1, 1), 8)", False),  # grouped
    ],
)
def test_the_conv_rewrites_read_groups_of_modules_and_bound_geometries(init: str, taken: bool) -> None:
    from kegen.search.operators.mutations import MutationError
    from kegen.search.operators.templates.gpu_conv import _conv_attr

    fn = ast.parse(f"def __init__(self):\n    {init}").body[0]
    assert isinstance(fn, ast.FunctionDef)
    if taken:
        assert _conv_attr(fn) == "conv"
    else:
        with pytest.raises(MutationError):
            _conv_attr(fn)
