"""Offline mutations (AST rewrites of knobs and recipes), drafting from the reference, the offline operator."""

from __future__ import annotations

import ast
import random
import textwrap

import pytest

from kegen.search.config import OperatorConfig
from kegen.search.operators import templates
from kegen.search.operators.context import Diagnosis, OperatorContext, ProblemInfo
from kegen.search.operators.drafting import DraftError, analyze, draft_candidate
from kegen.search.operators.mutations import (
    MutationError,
    find_knobs,
    knob_mutations,
    recipe_mutations,
    set_knob,
)
from kegen.search.operators.mutations.recipes import softmax_shape
from kegen.search.operators.offline import OfflineOperator
from kegen.search.store import Node, code_hash
from tests.search.search_helpers import EXAMPLES

LITERAL = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr, UNROLL: tl.constexpr = 2):
        for i in range(0, n, BLOCK):
            tl.load(x_ptr + i)

    def launch(x, n):
        k[(triton.cdiv(n, 64),)](x, n, BLOCK=64)
        k[(n // 64,)](x, n, BLOCK=64, num_stages=2)
""")


def test_find_and_set_block_knobs_follow_the_grid() -> None:
    knobs = {k.key: k for k in find_knobs(LITERAL)}
    assert knobs["default:k:0:UNROLL"].value == 2
    block = knobs["launch:k:0:BLOCK"]
    assert (
        block.value == 64
        and knobs["launch:k:1:num_stages"].value == 2
        and knobs["launch:k:0:num_stages"].value == 1
    )
    new = set_knob(LITERAL, block, 256)
    assert "triton.cdiv(n, 256)" in new and "n // 256" in new and "BLOCK=256" in new and "64" not in new
    new = set_knob(LITERAL, knobs["default:k:0:UNROLL"], 4)
    assert "UNROLL: tl.constexpr=4" in new


def test_launch_options_are_added_or_changed_per_launch() -> None:
    knobs = {k.key: k for k in find_knobs(LITERAL)}
    new = set_knob(LITERAL, knobs["launch:k:0:num_stages"], 3)
    calls = [
        n for n in ast.walk(ast.parse(new)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
    ]
    stages = [{kw.arg: kw.value.value for kw in c.keywords}.get("num_stages") for c in calls]
    assert stages == [3, 2]
    muts = {m.name for m in knob_mutations(LITERAL)}
    assert {"BLOCK=128@k", "BLOCK=32@k", "num_stages=2@k#0", "dual_core=True@k#1"} <= muts
    assert not any(
        m.startswith("num_stages") for m in (x.name for x in knob_mutations(LITERAL, launch_options=False))
    )
    no_loop = LITERAL.replace("for i in range(0, n, BLOCK):\n        tl.load(x_ptr + i)", "pass")
    names = {m.name for m in knob_mutations(no_loop)}
    assert "dual_core=True@k#0" in names and not any(n.startswith("num_stages") for n in names)


def test_softmax_recipes() -> None:
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    assert softmax_shape(seed) == "two_kernel"
    assert softmax_shape(templates.softmax("three_pass")) == "three_pass"
    seed = set_knob(seed, next(k for k in find_knobs(seed) if k.name == "num_stages"), 2)
    recipes = {m.name: m for m in recipe_mutations(seed)}
    assert set(recipes) == {"online_softmax", "row_in_one_block", "reciprocal"}
    online = recipes["online_softmax"].apply(seed)
    assert softmax_shape(online) == "online" and "m_new" in online and "STATS_BLOCK" not in online
    one = recipes["row_in_one_block"].apply(seed)
    assert softmax_shape(one) == "single_block" and "next_power_of_2" in one
    assert [m.name for m in recipe_mutations(one)] == ["reciprocal"]
    recip = recipe_mutations(one)[0].apply(one)
    assert "e * (1.0 / tl.sum(e, axis=0))" in recip and recipe_mutations(recip) == []


def test_reciprocal_only_for_block_by_scalar_divisions() -> None:
    src = textwrap.dedent("""
        @triton.jit
        def k(x_ptr, s_ptr, n, BLOCK: tl.constexpr):
            cols = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + cols)
            other = tl.load(s_ptr + cols)
            a = n / 2
            tl.store(x_ptr + cols, x / other + x / tl.load(s_ptr))
        """)
    (m,) = recipe_mutations(src)
    out = m.apply(src)
    assert "x / other" in out and "x * (1.0 / tl.load(s_ptr))" in out and "a = n / 2" in out


def test_grouped_order_recipe_rewrites_the_program_order() -> None:
    seed = (EXAMPLES / "matmul" / "seed.py").read_text()
    (m4, m8) = [m for m in recipe_mutations(seed) if m.family == "recipe_grouped_order"]
    gpu = [m for m in recipe_mutations(seed, "nvidia") if m.family == "recipe_grouped_order"]
    assert m4.prior < gpu[0].prior and gpu[0].helps == ("memory",)  # the MTIA guide: no cache to reuse
    new = m4.apply(seed)
    assert "GROUP: tl.constexpr = 4" in new and "first_pid_m" in new and "pid // num_pid_n" not in new
    assert recipe_mutations(new) == []  # applied once


def test_drafting_recognises_op_classes(tmp_path) -> None:
    assert analyze(EXAMPLES / "softmax" / "problem.py").op_class == "softmax"
    assert analyze(EXAMPLES / "matmul" / "problem.py").ops == ["matmul", "relu"]
    code, a = draft_candidate(EXAMPLES / "vector_add" / "problem.py")
    assert a.op_class == "elementwise" and "(v0 + v1)" in code and "class ModelNew" in code
    cases = {
        "torch.sigmoid(x) * y - 2.0": "elementwise",
        "torch.sum(x, dim=-1)": "reduction",
        "x.mean(dim=-1, keepdim=True)": "reduction",
        "torch.index_select(x, 0, y)": "gather",
    }
    for expr, op_class in cases.items():
        p = tmp_path / f"p{abs(hash(expr))}.py"
        text = PROBLEM.format(
            expr=expr, y="torch.randint(0, 8, (4,))" if "index" in expr else "torch.randn(8, 16)"
        )
        if "y" not in expr:
            text = text.replace("forward(self, x, y)", "forward(self, x)").replace(
                ", torch.randn(8, 16)]", "]"
            )
        p.write_text(text)
        a = analyze(p)
        assert a.op_class == op_class, (expr, a.summary)
        ast.parse(a.source)


def test_drafting_layer_norm_keeps_the_module_weights(tmp_path) -> None:
    p = tmp_path / "ln.py"
    p.write_text(
        PROBLEM.replace(
            "def __init__(self):\n        super().__init__()",
            "def __init__(self):\n        super().__init__()\n        self.norm = nn.LayerNorm(16)",
        )
        .format(expr="self.norm(x)", y="")
        .replace("forward(self, x, y)", "forward(self, x)")
        .replace(", ]", "]")
    )
    a = analyze(p)
    assert a.op_class == "normalization"
    assert "self.norm = nn.LayerNorm((16,), eps=1e-05, bias=True)" in a.source  # rebuilt by `twins`
    assert "w = self.norm.weight.detach()" in a.source and "b = self.norm.bias.detach()" in a.source
    ast.parse(a.source)


def test_drafting_says_which_ops_it_cannot_draft(tmp_path) -> None:
    p = tmp_path / "conv.py"
    p.write_text(PROBLEM.format(expr="torch.cumsum(x, dim=1) + torch.flip(y, [0])", y="torch.randn(8, 16)"))
    with pytest.raises(DraftError, match="cumsum") as err:
        draft_candidate(p)
    assert "flip" in str(err.value) and "--seed" in str(err.value)


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return {expr}

def get_inputs():
    return [torch.randn(8, 16), {y}]

def get_init_inputs():
    return []
"""


def _ctx(code: str, bound: str | None, siblings=(), known=frozenset()) -> OperatorContext:
    from kegen.search.operators.context import Attempt

    node = Node(
        id=1,
        run_id="r",
        parent_id=None,
        depth=0,
        code=code,
        code_hash=code_hash(code),
        status="done",
        verdict="ok",
        score=1.0,
        speedup=1.0,
        is_bug=False,
        operator="seed",
        description="seed",
        target="mtia",
        island=0,
        visits=1,
        value_sum=1.0,
        created_at=0.0,
        evaluated_at=0.0,
    )
    info = ProblemInfo(path=EXAMPLES / "softmax" / "problem.py", source="", op_class="softmax")
    return OperatorContext(
        problem=info,
        parent=node,
        parent_code=code,
        parent_eval=None,
        phase="optimize",
        diagnosis=Diagnosis(bound=bound),
        failure=None,
        attempts=[Attempt(i, d, "ok", 1.0, "sibling") for i, d in enumerate(siblings)],
        knowledge=[],
        known_hashes=frozenset(known),
    )


def test_offline_operator_is_steered_and_never_repeats() -> None:
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    op = OfflineOperator(OperatorConfig(), seed=0)
    first = op.propose(_ctx(seed, "memory"))
    assert first.code is not None and first.meta["family"].startswith("recipe")
    seen = {first.description}
    hashes = {code_hash(first.code)}
    for _ in range(6):
        p = op.propose(_ctx(seed, "memory", siblings=seen, known=frozenset(hashes)))
        assert p.code is not None and p.description not in seen and code_hash(p.code) not in hashes
        ast.parse(p.code)
        seen.add(p.description)
        hashes.add(code_hash(p.code))


def test_offline_operator_learns_which_families_pay_off() -> None:
    seed = (EXAMPLES / "vector_add" / "seed.py").read_text()
    op = OfflineOperator(OperatorConfig(), seed=1)
    op.rng = random.Random(1)
    for _ in range(5):
        op.gains["dual_core"].append(1.0)
        op.gains["block_up"].append(-0.5)
    p = op.propose(_ctx(seed, None))
    assert p.meta["family"] == "dual_core"


def test_offline_operator_reports_exhaustion_and_debug() -> None:
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    p = OfflineOperator(OperatorConfig()).propose(_ctx(code, "memory"))
    assert p.code is None and p.meta.get("exhausted")
    ctx = _ctx(code, None)
    ctx.phase = "debug"
    p = OfflineOperator(OperatorConfig()).propose(ctx)
    assert p.code is None and p.verdict == "no_code"


def test_a_block_knob_refuses_a_grid_with_its_literal_on_two_axes() -> None:
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def k2(x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
            pass

        def launch(x, M, N):
            k2[(triton.cdiv(M, 32), triton.cdiv(N, 32))](x, M, N, BLOCK_M=32, BLOCK_N=32)
        """)
    knob = next(k for k in find_knobs(src) if k.name == "BLOCK_M")
    with pytest.raises(MutationError, match="more than once"):
        set_knob(src, knob, 64)  # rewriting both 32s would shrink the N axis's grid: incomplete output
