"""The operator context builder: parent code, failure or measured profile, history, knowledge, prompt."""

from __future__ import annotations

import json
from dataclasses import replace

from kegen.search.config import OperatorConfig
from kegen.search.operators.context import ContextBuilder, ProblemInfo, load_knowledge_base
from kegen.search.operators.llm.prompt import render_prompt
from kegen.search.policies.base import Selection
from tests.search.search_helpers import EXAMPLES, HERE, new_run

GOLDEN = HERE / "golden"
SEED_PROFILE = json.loads((GOLDEN / "softmax_seed.profile.json").read_text())
SPLIT_PROFILE = json.loads((GOLDEN / "softmax_split_rows.profile.json").read_text())


def _setup(store):
    problem = EXAMPLES / "softmax" / "problem.py"
    run = new_run(store, str(problem))
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    root = store.add_node(run, parent_id=None, code=seed, operator="seed", description="seed")
    store.record_evaluation(root, status="ok", fitness=1.0, profile=SEED_PROFILE)
    a = store.add_node(
        run, parent_id=root, code=seed + "\n# a", operator="offline", description="split rows over 4 programs"
    )
    store.record_evaluation(a, status="ok", fitness=2.76, profile=SPLIT_PROFILE)
    bad = store.add_node(run, parent_id=root, code=seed + "\n# bad", operator="offline", description="break it")
    store.record_evaluation(
        bad,
        status="incorrect",
        message="output mismatch: max abs error 0.5 at (3, 7)",
        metrics={"max_abs_error": 0.5, "source_line": "cand.py:12"},
    )
    info = ProblemInfo(
        path=problem, source=problem.read_text(), op_class="softmax", op_summary="softmax: softmax"
    )
    return run, root, a, bad, info


def test_context_for_a_correct_parent(store) -> None:
    run, root, a, bad, info = _setup(store)
    kb = load_knowledge_base()
    ctx = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=4000), kb).build(Selection(a))
    assert ctx.parent.id == a and ctx.parent_code.endswith("# a")
    assert ctx.phase == "optimize" and ctx.failure is None
    # the bottleneck is measured on this candidate (launch overhead of two short kernels), not the roofline's
    assert ctx.diagnosis.bottleneck is not None and ctx.diagnosis.bottleneck.kind == "launch_overhead"
    assert ctx.profile is not None and ctx.grandparent_profile is not None
    assert [x.node_id for x in ctx.ancestors] == [root]
    assert store.node(bad).code_hash in ctx.known_hashes
    assert any("library" in c for c in ctx.constraints) and any("cheat" in c for c in ctx.constraints)
    if kb is not None:
        assert ctx.knowledge and sum(len(t) for _, t in ctx.knowledge) <= 4000
    name, system, user = render_prompt(ctx)
    assert name == "optimize.tmpl"
    assert "ModelNew" in system and "SEARCH" in system
    for part in ("torch.softmax", "# a", "node " + str(root), "No library fallbacks", "measured bottleneck"):
        assert part in user
    # the change from the parent (the seed) says the idle PEs were fixed
    assert "fixes the idle PEs: 16 -> 64 of 64" in user


def test_the_seed_prompt_says_16_of_64_pes(store) -> None:
    run, root, a, bad, info = _setup(store)
    ctx = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=0)).build(Selection(root))
    assert ctx.diagnosis.bottleneck is not None and ctx.diagnosis.bottleneck.kind == "occupancy"
    assert ctx.diagnosis.bound == "memory"  # DMA-type occupancy: knowledge for memory-bound kernels
    _, _, user = render_prompt(ctx)
    assert "16 programs on 16 of 64 PEs (48 PEs idle)" in user
    assert "more programs so every PE has work" in user  # the remedy of the measured bottleneck
    # siblings are listed with their error messages and their measured effect
    assert "output mismatch: max abs error 0.5" in user
    assert "fixes the idle PEs" in user


def test_context_for_a_failed_parent_and_the_root(store) -> None:
    run, root, a, bad, info = _setup(store)
    builder = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=0))
    ctx = builder.build(Selection(bad, phase="debug"))
    assert ctx.phase == "debug"
    assert "incorrect" in ctx.failure and "output mismatch" in ctx.failure and "0.5" in ctx.failure
    name, _, user = render_prompt(ctx)
    assert name == "debug.tmpl" and "output mismatch" in user
    assert "Last correct ancestor" in user and "16 of 64 PEs" in user  # the performance to keep
    ctx = builder.build(Selection(root, phase="draft"))
    assert {x.description for x in ctx.siblings} == {"split rows over 4 programs", "break it"}
    name, _, user = render_prompt(ctx)  # a correct root: the draft phase asks for edits of it
    assert name == "optimize.tmpl" and "split rows over 4 programs" in user
    ctx.parent = replace(ctx.parent, status="failed")  # no correct starting point: a draft prompt
    name, _, user = render_prompt(ctx)
    assert name == "draft.tmpl" and "split rows over 4 programs" in user and "Recognised ops: softmax" in user
    # drafting carries the reference roofline and the problem's shapes
    assert "ROWS=16" in user and "COLS=512" in user and "minimum DRAM traffic 65.54 kB" in user
