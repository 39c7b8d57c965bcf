"""The whole attention plan in one move (mutations/memory/attention_plan.py).

It must equal the attention moves applied one after another (persistent 128-query tiles, scores a
block ahead, exp2, the fixed-reference softmax), skip the steps a kernel already has, and stay exact
on the simulator with a ragged sequence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.attention import rewrite as exp2_rewrite
from kegen.search.operators.mutations.memory.attention_persist import rewrite as persist_rewrite
from kegen.search.operators.mutations.memory.attention_pipeline import rewrite as pipeline_rewrite
from kegen.search.operators.mutations.memory.attention_plan import attention_plan_mutations, plan
from kegen.search.operators.mutations.memory.attention_rescale import rewrite as rescale_rewrite
from kegen.suites import find_suite

PROBLEM = find_suite("production").select(["attention_fwd_fp16"]).problems[0]
SEED = PROBLEM.seed_path.read_text()
K = "attention_kernel"


def _by_steps(heads_first: bool) -> str:
    src = persist_rewrite(SEED, K, query_block=128, heads_first=heads_first)
    return rescale_rewrite(exp2_rewrite(pipeline_rewrite(src, K), K), K)


def test_the_plan_is_the_moves_one_after_another() -> None:
    assert [m.name for m in attention_plan_mutations(SEED)] == [
        "attention_plan@attention_kernel/dual", "attention_plan@attention_kernel/qfirst",
        "attention_plan@attention_kernel/heads", "attention_plan@attention_kernel/grid"]
    assert plan(SEED, K, "qfirst") == _by_steps(heads_first=False)
    assert plan(SEED, K, "heads") == _by_steps(heads_first=True)
    dual = SEED.replace("BLOCK_N=64)", "BLOCK_N=64, dual_core=True)")
    assert dual != SEED
    by_steps = rescale_rewrite(exp2_rewrite(pipeline_rewrite(persist_rewrite(dual, K, heads_first=False), K), K), K,
                               unroll=False)
    assert plan(SEED, K, "dual") == by_steps  # its own query block, one key block per iteration
    assert "[min(2 * PERSIST_PROGRAMS, " in by_steps
    flat = plan(SEED, K, None)
    assert "persist_tile" not in flat and "kegen_negm" in flat


def test_steps_the_kernel_has_are_skipped() -> None:
    persistent = exp2_rewrite(pipeline_rewrite(persist_rewrite(SEED, K, query_block=128), K), K)
    moves = attention_plan_mutations(persistent)
    assert [m.name for m in moves] == ["attention_plan@attention_kernel/grid"]  # already persistent
    assert moves[0].apply(persistent) == rescale_rewrite(persistent, K)
    with pytest.raises(MutationError):
        plan(persistent, K, "qfirst")
    assert attention_plan_mutations(rescale_rewrite(persistent, K)) == []  # nothing left to plan


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["qfirst", "dual"])
def test_the_planned_kernel_is_exact_on_the_simulator(variant: str, tmp_path: Path) -> None:
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    problem = tmp_path / "attention.py"
    problem.write_text(PROBLEM.problem_path.read_text() + "\n\nSEQ = 144\nHEADS = 3\nBATCH = 1\n")
    out = plan(SEED, K, variant).replace("PERSIST_PROGRAMS = 64", "PERSIST_PROGRAMS = 4")
    r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"
