"""The attention move (mutations/attention.py): scale folded into Q, exp2, the key mask under EVEN_N.

AST-level: what the rewrite emits on the suites' attention seeds and which kernels it leaves alone.
Simulated: the rewritten production seed is correct against PyTorch with a sequence length that
divides the key block and with one that does not (the masked path).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.attention import attention_mutations, rewrite
from kegen.suites import find_suite

SEEDS = {
    "production": find_suite("production").select(["attention_fwd_fp16"]).problems[0],
    "default": find_suite("default").select(["attention_fwd"]).problems[0],
}


@pytest.mark.parametrize("suite", sorted(SEEDS))
def test_the_attention_seeds_get_exp2_and_the_scale_in_q(suite: str) -> None:
    seed = SEEDS[suite].seed_path.read_text()
    (m,) = attention_mutations(seed)
    out = m.apply(seed)
    assert "tl.exp(" not in out and out.count("tl.exp2(") == seed.count("tl.exp(")
    assert "q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)" in out
    assert "s = tl.dot(q, kt)\n" in out
    assert attention_mutations(out) == []  # nothing left to fold


def test_the_key_mask_runs_only_when_the_sequence_does_not_divide_the_key_block() -> None:
    out = rewrite(SEEDS["production"].seed_path.read_text(), "attention_kernel")
    assert "        if not EVEN_N:\n            s = tl.where(keys[None, :] < seq, s, float('-inf'))" in out
    assert "EVEN_N: tl.constexpr)" in out
    assert "KEY_BLOCK = 64\n" in out and "BLOCK_N=KEY_BLOCK, EVEN_N=seq % KEY_BLOCK == 0)" in out


@pytest.mark.parametrize(
    "edit",
    [
        ("s = tl.dot(q, kt) * scale", "s = tl.dot(q, kt)"),  # no scale to fold
        ("p = tl.exp(s - m_new[:, None])", "p = tl.exp(s) / tl.exp(m_new[:, None])"),  # not a difference
        ("acc = acc / l_i[:, None]", "acc = acc / l_i[:, None] + tl.exp(l_i - l_i)[:, None]"),  # exp outside
    ],
)
def test_other_softmax_loops_are_left_alone(edit: tuple[str, str]) -> None:
    seed = SEEDS["production"].seed_path.read_text()
    assert edit[0] in seed
    src = seed.replace(*edit)
    assert attention_mutations(src) == []
    with pytest.raises(MutationError):
        rewrite(src, "attention_kernel")


@pytest.mark.slow
@pytest.mark.parametrize("seq", [128, 80])
def test_the_rewritten_seed_is_correct_on_the_simulator(seq: int, tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    p = SEEDS["production"]
    problem = tmp_path / "attention.py"
    problem.write_text(p.problem_path.read_text() + f"\n\nSEQ = {seq}\nHEADS = 2\nBATCH = 1\n")
    out = rewrite(p.seed_path.read_text(), "attention_kernel")
    r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"
