"""The operator context builder: parent code, failure or profile diagnosis, history, knowledge, prompt."""

from __future__ import annotations

from search_helpers import EXAMPLES, new_run

from kegen.search.config import OperatorConfig
from kegen.search.operators.context import ContextBuilder, ProblemInfo, diagnose, load_knowledge_base
from kegen.search.operators.prompt import render_prompt
from kegen.search.policies.base import Selection

PROFILE = {
    "bound": "memory",
    "time_s": 2e-6,
    "roofline_fraction": 0.31,
    "utilisation": {"dma": 0.82, "simd": 0.12, "dpe": 0.0},
    "top_stall_reasons": [["dma_wait", 0.55], ["scalar", 0.2], ["barrier", 0.05], ["x", 0.01]],
}


def _setup(store):
    problem = EXAMPLES / "softmax" / "problem.py"
    run = new_run(store, str(problem))
    seed = (EXAMPLES / "softmax" / "seed.py").read_text()
    root = store.add_node(run, parent_id=None, code=seed, operator="seed", description="seed")
    store.record_evaluation(root, status="ok", fitness=1.0, profile=PROFILE)
    a = store.add_node(
        run, parent_id=root, code=seed + "\n# a", operator="offline", description="set BLOCK 32 -> 64"
    )
    store.record_evaluation(a, status="ok", fitness=1.4, profile=PROFILE)
    bad = store.add_node(
        run, parent_id=root, code=seed + "\n# bad", operator="offline", description="break it"
    )
    store.record_evaluation(
        bad,
        status="incorrect",
        message="output mismatch",
        metrics={"max_abs_error": 0.5, "source_line": "cand.py:12"},
    )
    info = ProblemInfo(
        path=problem, source=problem.read_text(), op_class="softmax", op_summary="softmax: softmax"
    )
    return run, root, a, bad, info


def test_diagnosis_reads_the_profile() -> None:
    d = diagnose(PROFILE)
    assert d.bound == "memory" and d.roofline_fraction == 0.31
    assert d.stalls[0] == ("dma_wait", 0.55) and len(d.stalls) == 3
    assert d.utilisation[0] == ("dma", 0.82)
    text = d.text()
    assert "memory-bound" in text and "dma_wait 55%" in text and "31.0% of roofline" in text
    assert diagnose({}).text() == "no profile available"


def test_context_for_a_correct_parent(store) -> None:
    run, root, a, bad, info = _setup(store)
    kb = load_knowledge_base()
    ctx = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=4000), kb).build(Selection(a))
    assert ctx.parent.id == a and ctx.parent_code.endswith("# a")
    assert ctx.phase == "optimize" and ctx.failure is None and ctx.diagnosis.bound == "memory"
    assert [x.node_id for x in ctx.ancestors] == [root]
    assert ctx.siblings == []
    assert store.node(bad).code_hash in ctx.known_hashes
    assert any("library" in c for c in ctx.constraints) and any("cheat" in c for c in ctx.constraints)
    if kb is not None:
        assert ctx.knowledge and sum(len(t) for _, t in ctx.knowledge) <= 4000
    name, system, user = render_prompt(ctx)
    assert name == "optimize.tmpl"
    assert "ModelNew" in system and "SEARCH" in system
    for part in ("torch.softmax", "# a", "memory-bound", "node " + str(root), "No library fallbacks"):
        assert part in user


def test_context_for_a_failed_parent_and_the_root(store) -> None:
    run, root, a, bad, info = _setup(store)
    builder = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=0))
    ctx = builder.build(Selection(bad, phase="debug"))
    assert ctx.phase == "debug"
    assert "incorrect" in ctx.failure and "output mismatch" in ctx.failure and "0.5" in ctx.failure
    name, _, user = render_prompt(ctx)
    assert name == "debug.tmpl" and "output mismatch" in user
    ctx = builder.build(Selection(root, phase="draft"))
    assert {x.description for x in ctx.siblings} == {"set BLOCK 32 -> 64", "break it"}
    name, _, user = render_prompt(ctx)
    assert name == "draft.tmpl" and "set BLOCK 32 -> 64" in user and "Recognised ops: softmax" in user
