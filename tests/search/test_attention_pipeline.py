"""The score-ahead attention move (mutations/memory/attention_pipeline.py).

AST-level: what the rewrite emits on the suites' attention kernels (seed, exp2 form, the drafting
template) and which loops it leaves alone. Simulated: the rewritten kernels are correct against
PyTorch with a sequence that divides the key block and one that does not (the clamped last block).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.attention import attention_mutations
from kegen.search.operators.mutations.memory.attention import rewrite as exp2_rewrite
from kegen.search.operators.mutations.memory.attention_pipeline import attention_pipeline_mutations, rewrite
from kegen.search.operators.templates.attention import attention
from kegen.suites import find_suite

PROBLEM = find_suite("production").select(["attention_fwd_fp16"]).problems[0]
SEED = PROBLEM.seed_path.read_text()


def _exp2_form() -> str:
    """The production seed after the exp2 move, with two load stages and dual core (the b30 best's launch)."""
    out = exp2_rewrite(SEED, "attention_kernel")
    return out.replace("BLOCK_N=KEY_BLOCK,", "BLOCK_N=KEY_BLOCK, num_stages=2, dual_core=True,")


def test_the_exp2_form_computes_the_next_blocks_scores_before_this_blocks_softmax() -> None:
    src = exp2_rewrite(SEED, "attention_kernel")
    (m,) = attention_pipeline_mutations(src)
    out = m.apply(src)
    body = out[out.index("    for start in range(0, seq, BLOCK_N):"): out.index("    acc = acc / l_i")]
    lines = [ln.strip() for ln in body.splitlines()]
    assert lines[1] == "start_next = tl.minimum(start + BLOCK_N, start_last)"
    assert lines[4] == "s_next = tl.dot(q, kt_next)"
    assert lines[-1] == "s = s_next"
    assert "kt = tl.load" not in body and "s = tl.dot" not in body  # this block's K tile is not reloaded
    assert "keys = start + offs_n" in body  # still read by the V load and the key mask
    before = out[: out.index("    for start in range")]
    assert "start_last = 0 + (seq - 1 - 0) // BLOCK_N * BLOCK_N" in before
    assert "s = tl.dot(q, kt_first)\n" in before
    assert attention_pipeline_mutations(out) == []  # already a block ahead


def test_only_the_product_goes_ahead_and_its_scale_stays_in_place() -> None:
    out = rewrite(SEED, "attention_kernel")
    body = out[out.index("    for start in range(0, seq, BLOCK_N):"): out.index("    acc = acc / l_i")]
    lines = [ln.strip() for ln in body.splitlines()]
    assert lines[4] == "s_dot_next = tl.dot(q, kt_next)"  # no SIMD work ahead of this block's softmax
    assert lines[6] == "s = s_dot * scale" and lines[-1] == "s_dot = s_dot_next"
    assert "    s_dot = tl.dot(q, kt_first)\n" in out


def test_scores_of_several_products_are_left_alone() -> None:
    src = SEED.replace("s = tl.dot(q, kt) * scale", "s = (tl.dot(q, kt) + tl.dot(q, kt)) * scale")
    with pytest.raises(MutationError, match="not one tl.dot"):
        rewrite(src, "attention_kernel")


def test_the_launch_drops_to_one_load_stage() -> None:
    (m,) = attention_pipeline_mutations(_exp2_form())
    out = m.apply(_exp2_form())
    assert "num_stages=1, dual_core=True" in out


def test_the_drafting_template_is_recognised() -> None:
    src = attention(["q", "k", "v"], "q", "k", "v", (1, 2, 64, 32), (4096, 2048, 32, 1), 64, 64, causal=True)
    (m,) = attention_pipeline_mutations(src)
    assert "s = s_next" in m.apply(src)


@pytest.mark.parametrize(
    "edit",
    [
        # the scores read a value carried by the loop: they cannot be computed a block early
        ("s = tl.dot(q, kt) * scale", "s = tl.dot(q, kt) * scale + m_i[:, None]"),
        # no second product after the scores: not an attention loop
        ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)", "acc = acc * alpha[:, None] + p"),
        # the K tile comes from a statement with a side effect
        ("s = tl.dot(q, kt) * scale", "s = tl.dot(q, tl.atomic_add(k_ptr + keys[None, :], 0.0)) * scale"),
    ],
)
def test_other_loops_are_left_alone(edit: tuple[str, str]) -> None:
    assert edit[0] in SEED
    src = SEED.replace(*edit)
    assert attention_pipeline_mutations(src) == []
    with pytest.raises(MutationError):
        rewrite(src, "attention_kernel")


def test_the_exp2_move_applies_after_the_score_ahead_move() -> None:
    """The two moves compose in either order: on the score-ahead kernel the product is carried in
    s_dot, and the exp2 move still folds the scale into Q (both of Q's dots are scaled by it)."""
    ahead = rewrite(SEED, "attention_kernel")
    (m,) = attention_mutations(ahead)
    out = m.apply(ahead)
    body = out[out.index("    for start in range(0, seq, BLOCK_N):"): out.index("    acc = acc / l_i")]
    lines = [ln.strip() for ln in body.splitlines()]
    assert "s = s_dot" in lines and "s = s_dot * scale" not in lines
    assert "p = tl.exp2(s - m_new[:, None])" in lines and "tl.exp(" not in out
    before = out[: out.index("    for start in range")]
    fold = "    q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)\n"
    assert fold in before and before.index(fold) < before.index("s_dot = tl.dot(q, kt_first)")
    assert attention_mutations(out) == [] and attention_pipeline_mutations(out) == []


def test_q_may_be_redefined_from_itself_before_the_loop() -> None:
    """`q = q.to(...)` before the loop is part of Q's definition: the scale is folded after it."""
    src = rewrite(SEED, "attention_kernel").replace("    m_i = tl.full", "    q = q.to(q.dtype)\n    m_i = tl.full", 1)
    (m,) = attention_mutations(src)
    out = m.apply(src)
    assert "    q = q.to(q.dtype)\n    q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)\n" in out


@pytest.mark.parametrize(
    "edit",
    [
        # the carried product is also read unscaled: folding the scale into Q would change it
        ("m_i = m_new\n", "m_i = m_new + tl.max(s_dot, axis=1) * 0.0\n"),
        # Q is read by something other than the scores' dots
        ("acc = acc / l_i[:, None]", "acc = acc / l_i[:, None] + q.to(tl.float32)"),
    ],
)
def test_the_exp2_move_refuses_a_score_ahead_kernel_that_reads_q_or_the_product_elsewhere(
    edit: tuple[str, str],
) -> None:
    ahead = rewrite(SEED, "attention_kernel")
    assert edit[0] in ahead
    src = ahead.replace(*edit)
    assert attention_mutations(src) == []
    with pytest.raises(MutationError):
        exp2_rewrite(src, "attention_kernel")


@pytest.mark.slow
@pytest.mark.parametrize(("seq", "form"), [(128, "exp2"), (80, "seed"), (80, "ahead")])
def test_the_rewritten_kernels_are_correct_on_the_simulator(seq: int, form: str, tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    problem = tmp_path / "attention.py"
    problem.write_text(PROBLEM.problem_path.read_text() + f"\n\nSEQ = {seq}\nHEADS = 2\nBATCH = 1\n")
    src = _exp2_form() if form == "exp2" else SEED
    out = rewrite(src, "attention_kernel")
    if form == "ahead":  # score-ahead first, then the exp2 move on top
        out = exp2_rewrite(out, "attention_kernel")
    r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"
