"""Attention drafted from what the reference computes (drafting.attention): any spelling of it, checked
against torch's attention at draft time and on the simulator afterwards."""

from __future__ import annotations

import textwrap

import pytest

from kegen.eval import EvalConfig, evaluate
from kegen.search.operators.drafting import analyze
from lowering.backend.driver import MtiaDriver

needs_mtia = pytest.mark.skipif(not MtiaDriver.is_active(), reason="evaluates on the mtia simulator")

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def _problem(tmp_path, name: str, forward: str, inputs: str, init: str = "pass", args: str = "q, k, v"):
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    src = HEAD + (
        f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {init}\n\n"
        f"    def forward(self, {args}):\n{body}\n\n\ndef get_inputs():\n    return {inputs}\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return path


QKV = "[torch.randn(1, 2, {s}, 32, dtype=torch.float16) for _ in range(3)]"

# causal attention spelled out, fp32 math, a mask torch.fx cannot trace (torch.ones of a proxy size)
CAUSAL = """
s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
n = q.shape[-2]
s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)
"""


@needs_mtia
def test_spelled_out_causal_attention_is_drafted_as_the_template_and_is_correct(tmp_path) -> None:
    problem = _problem(tmp_path, "causal", CAUSAL, QKV.format(s=80))  # 80: a ragged last key block
    a = analyze(problem)
    assert a.op_class == "attention" and "confirmed numerically" in a.summary
    assert "kegen_attention_kernel" in a.source and "CAUSAL=True" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=5, trials=2))
    assert r.ok, r.message


@needs_mtia
def test_sdpa_with_an_additive_mask_and_a_scale_of_one(tmp_path) -> None:
    problem = _problem(
        tmp_path, "masked", "return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=1.0)",
        "[*(torch.randn(1, 2, 48, 32) * 0.3 for _ in range(3)), torch.randn(1, 1, 48, 48)]", args="q, k, v, m",
    )  # fmt: skip
    a = analyze(problem)
    assert a.op_class == "attention" and "MASK=True" in a.source and "(1.0) *" in a.source
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=2, trials=2))
    assert r.ok, r.message


def test_what_only_looks_like_attention_is_left_to_the_other_drafters(tmp_path) -> None:
    # a softmax over the queries' axis: not attention, whatever the matmuls around it
    other_axis = "return (torch.softmax(q.float() @ k.float().transpose(-1, -2), dim=-2) @ v.float()).half()"
    assert analyze(_problem(tmp_path, "axis", other_axis, QKV.format(s=16))).op_class != "attention"
    # learned projections are not the template's computation
    proj = "return F.scaled_dot_product_attention(self.p(q), k, v)"
    assert analyze(_problem(tmp_path, "proj", proj, QKV.format(s=16), init="self.p = nn.Linear(32, 32)")) \
        .op_class != "attention"  # fmt: skip


# grouped-query attention: K/V with fewer heads, repeated (or expanded) to the query heads in the reference
GQA_REPEAT = """
g = q.shape[1] // k.shape[1]
return F.scaled_dot_product_attention(q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1){causal})
"""
GQA_EXPAND = """
b, hk, s, d = k.shape
k = k[:, :, None].expand(b, hk, q.shape[1] // hk, s, d).reshape(b, q.shape[1], s, d)
v = v[:, :, None].expand(b, hk, q.shape[1] // hk, s, d).reshape(b, q.shape[1], s, d)
w = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * d**-0.5, dim=-1)
return (w @ v.float()).to(q.dtype)
"""


def _gqa_inputs(batch: int, heads: int, kv_heads: int, seq_q: int, seq_k: int) -> str:
    return (
        f"[torch.randn({batch}, {heads}, {seq_q}, 32, dtype=torch.float16), "
        f"*(torch.randn({batch}, {kv_heads}, {seq_k}, 32, dtype=torch.float16) for _ in range(2))]"
    )


# name -> (forward, (batch, heads, kv heads, queries, keys), the group's heads packed into a tile)
GQA = {
    # decoding: one query per head, 4 query heads per K/V head packed into one tile
    "decode": (GQA_REPEAT.format(causal=""), (2, 8, 2, 1, 72), True),
    # a few queries, causal (top-left: query i sees keys <= i), 3 heads per K/V head: 9 rows a tile
    "short_causal": (GQA_REPEAT.format(causal=", is_causal=True"), (1, 6, 2, 3, 40), True),
    # prefill spelled out with expand + reshape: each program one query head, its K/V head h // 2
    "prefill": (GQA_EXPAND, (1, 4, 2, 40, 40), False),
}


def gqa_problem(tmp_path, name: str):
    forward, shape, _ = GQA[name]
    return _problem(tmp_path, name, forward, _gqa_inputs(*shape))


@needs_mtia
@pytest.mark.parametrize("name", sorted(GQA))
def test_grouped_query_attention_reads_the_shared_kv_heads(tmp_path, name: str) -> None:
    problem = gqa_problem(tmp_path, name)
    a = analyze(problem)
    assert a.op_class == "attention", a.summary
    assert "GROUP=group" in a.source and "repeat" not in a.source and "expand(" not in a.source
    packed = GQA[name][2]
    assert ("head = h * GROUP + offs_m // SQ" in a.source) == packed
    assert ("(h // GROUP) * skh" in a.source) == (not packed)
    r = evaluate(str(problem), a.source, config=EvalConfig(target="mtia", seed=3, trials=2))
    assert r.ok, r.message
