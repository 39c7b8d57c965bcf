"""The fixed-reference softmax move (mutations/memory/attention_rescale.py).

AST-level: what the rewrite emits on the production attention after the persistent, score-ahead and
exp2 moves and on the drafting template, and which kernels it leaves alone. Simulated: the rewritten
kernels are exact against PyTorch on random inputs (the fast path), with a ragged sequence and an odd
key-block count (the remainder loop), and on inputs whose scores grow along the keys, which take the
fallback (the predicate is checked on the inputs themselves).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.attention import rewrite as exp2_rewrite
from kegen.search.operators.mutations.memory.attention_persist import rewrite as persist_rewrite
from kegen.search.operators.mutations.memory.attention_pipeline import rewrite as pipeline_rewrite
from kegen.search.operators.mutations.memory.attention_rescale import (
    HIGH_LOG2,
    LOW_LOG2,
    attention_rescale_mutations,
    rewrite,
)
from kegen.search.operators.templates.attention import attention
from kegen.suites import find_suite

PROBLEM = find_suite("production").select(["attention_fwd_fp16"]).problems[0]
SEED = PROBLEM.seed_path.read_text()
KERNEL = "attention_kernel"


def _best_form(persistent: bool = True) -> str:
    """The production seed as the budget-50 search left it: persistent 128-query tiles, score-ahead, exp2."""
    src = persist_rewrite(SEED, KERNEL, query_block=128) if persistent else SEED
    return exp2_rewrite(pipeline_rewrite(src, KERNEL), KERNEL)


def _fast_loops(out: str) -> str:
    return out[out.index("kegen_over = tl.zeros_like"): out.index("if tl.max(tl.maximum(kegen_over")]


def test_the_score_ahead_exp2_form_gets_both_variants() -> None:
    src = _best_form()
    assert [m.name for m in attention_rescale_mutations(src)] == [
        "attention_rescale@attention_kernel", "attention_rescale_single@attention_kernel"]
    out = rewrite(src, KERNEL)
    fast = _fast_loops(out)
    # the shift rides on the DPE's accumulator; no rescale, no running maximum in the fast loops
    assert fast.count("s_dot_next = tl.dot(q, kt_next, kegen_negm)") == 3  # two per pair + the remainder
    assert "alpha" not in fast and "m_new" not in fast
    assert fast.count("p = tl.exp2(s).to(v.dtype)") == 3  # the cast fused into the exponential
    assert fast.count("acc = tl.dot(p, v, acc)") == 3
    assert fast.count("l_i = l_i + tl.sum(p.to(tl.float32), axis=1)") == 3
    assert "for start_pair in range(start_lo, start_mid, 2 * BLOCK_N):" in fast
    assert "if start_mid < start_hi:\n            start = start_mid\n" in fast  # the odd block
    # the P narrowing goes after the V load (its dtype); the row maximum stays before the row sum
    first = fast[fast.index("start = start_pair\n"):]
    assert first.index("kegen_rowmax = tl.max(s, axis=1)") < first.index("v = tl.load") < first.index("p = tl.exp2")
    before = out[: out.index("kegen_over = tl.zeros_like")]
    assert "m_i_fix = tl.max(s_dot, axis=1)" in before and "s_dot = s_dot + kegen_negm" in before
    # the fallback: the original loop from its initial values, after M is set to the reference
    tail = out[out.index("        m_i = m_i_fix\n"):]
    assert tail.startswith("        m_i = m_i_fix\n        if tl.max(tl.maximum(kegen_over - 8.0, -2.0 - kegen_over)")
    assert "m_i = tl.full((BLOCK_M,), float('-inf'), dtype=tl.float32)" in tail
    assert "s_dot = tl.dot(q, kt_first)" in tail and "alpha = tl.exp2(m_i - m_new)" in tail
    assert "acc = acc * (1.0 / l_i)[:, None]" in tail and "acc / l_i" not in out  # one division per row
    assert attention_rescale_mutations(out) == []  # applied once


def test_the_single_variant_keeps_one_loop() -> None:
    out = rewrite(_best_form(), KERNEL, unroll=False)
    fast = _fast_loops(out)
    assert fast.count("for ") == 1 and fast.count("tl.exp2(s)") == 1


def test_the_natural_exponential_scales_the_thresholds() -> None:
    src = _best_form().replace("tl.exp2(", "tl.exp(")
    out = rewrite(src, KERNEL)
    assert f"kegen_over - {HIGH_LOG2 * math.log(2)!r}" in out and f"{LOW_LOG2 * math.log(2)!r} - kegen_over" in out
    assert "p = tl.exp(s).to(v.dtype)" in out


def test_the_drafting_template_with_masks_is_recognised() -> None:
    src = attention(["q", "k", "v"], "q", "k", "v", (1, 3, 100, 32), (9600, 3200, 32, 1), 100, 100, causal=True)
    out = rewrite(pipeline_rewrite(src, "kegen_attention_kernel"), "kegen_attention_kernel")
    assert "s = s + add.to(tl.float32) * 1.4426950408889634" in _fast_loops(out)  # an additive mask stays


@pytest.mark.parametrize(
    "edit",
    [
        ("s = tl.where(keys[None, :] < seq, s, float('-inf'))", "s = tl.where(keys[None, :] < seq, s, 0.0)"),
        ("p = tl.exp2(s - m_new[:, None])", "p = tl.exp2(s - m_new[:, None]) * 0.5"),
        ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
         "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)\n            tl.store(o_ptr, alpha)"),
        ("l_i = l_i * alpha + tl.sum(p, axis=1)", "l_i = l_i * alpha + tl.sum(p * p, axis=1)"),
        ("s = s_dot\n", "s = s_dot * 2.0\n"),
    ],
    ids=["mask-not-inf", "p-scaled", "alpha-stored", "p-squared", "scores-scaled"],
)
def test_other_softmax_loops_are_left_alone(edit: tuple[str, str]) -> None:
    src = _best_form()
    assert edit[0] in src, edit[0]
    bad = src.replace(*edit)
    assert attention_rescale_mutations(bad) == []
    with pytest.raises(MutationError, match="score-ahead"):
        rewrite(bad, KERNEL)


def test_a_loop_without_scores_ahead_is_left_alone() -> None:
    assert attention_rescale_mutations(exp2_rewrite(SEED, KERNEL)) == []  # apply attention_pipeline first
    assert attention_rescale_mutations(pipeline_rewrite(SEED, KERNEL)) == []  # scores scaled in the loop


GROWING = """

def get_inputs():
    # keys whose scores grow along the sequence: every row's maximum ends 2^16 above its first block's (P would overflow fp16)
    g = torch.Generator().manual_seed(0)
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    q = 1.0 + 0.1 * torch.randn(shape, generator=g)
    ramp = torch.linspace(0.0, 4.0, SEQ).view(1, 1, SEQ, 1)
    k = ramp + 0.1 * torch.randn(shape, generator=g)
    v = torch.randn(shape, generator=g)
    return [q.half(), k.half(), v.half()]
"""


def _takes_fallback(q, k, block: int) -> bool:  # noqa: ANN001
    """The move's predicate on these inputs: some row's maximum leaves [FIX - 2, FIX + 8] (log2 units)."""
    s = (q.float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5 * math.log2(math.e)
    fix = s[..., :block].amax(-1)
    over = s.amax(-1) - fix
    return bool(((over > HIGH_LOG2) | (over < LOW_LOG2)).any())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seq", "inputs", "unroll"),
    [(192, "random", True), (80, "random", True), (192, "random", False), (192, "growing", True)],
    ids=["odd-blocks", "ragged", "single", "fallback"],
)
def test_the_rewritten_kernels_are_exact_on_the_simulator(seq: int, inputs: str, unroll: bool,
                                                          tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    import torch

    from kegen.eval import EvalConfig, evaluate

    text = PROBLEM.problem_path.read_text() + f"\n\nSEQ = {seq}\nHEADS = 2\nBATCH = 1\n"
    if inputs == "growing":
        text += GROWING
        ns: dict[str, object] = {}
        exec(compile(text, "problem", "exec"), ns)  # noqa: S102 - the test's own problem file
        q, k, _ = ns["get_inputs"]()  # type: ignore[operator]
        assert _takes_fallback(q, k, 64)
    else:
        g = torch.Generator().manual_seed(1)
        q, k = (torch.randn(1, 2, seq, 64, generator=g).half() for _ in range(2))
        assert not _takes_fallback(q, k, 64)  # random inputs stay on the fast path
    problem = tmp_path / "attention.py"
    problem.write_text(text)
    out = rewrite(_best_form(), KERNEL, unroll=unroll).replace("PERSIST_PROGRAMS = 64", "PERSIST_PROGRAMS = 2")
    config = EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True)
    r = evaluate(problem, out, config=config)
    assert r.status.value == "ok", f"{r.status} {r.message}"
    if inputs == "growing":  # the fallback is what keeps it exact: without it P overflows
        broken = evaluate(problem, out.replace(f"kegen_over - {HIGH_LOG2!r}", "kegen_over - 1000.0"), config=config)
        assert broken.status.value == "incorrect", broken.message
