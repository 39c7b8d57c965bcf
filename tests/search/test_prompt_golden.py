"""Golden prompts for two problems (softmax: optimise its seed; gemm: draft), and the token budget.

The stored profiles under golden/ are real simulator profiles (tools/profile_fixtures.py). After
an intended change to the prompt, regenerate the golden text with
`KEGEN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/search/test_prompt_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from kegen.search.config import OperatorConfig
from kegen.search.operators.budget import estimate_tokens
from kegen.search.operators.context import ContextBuilder, ProblemInfo
from kegen.search.operators.llm.prompt import build_prompt, render_prompt
from kegen.search.policies.base import Selection
from tests.search.search_helpers import EXAMPLES, HERE, ROOT, new_run

GOLDEN = HERE / "golden"
CASES = {
    "softmax_optimize": (EXAMPLES / "softmax", "softmax_seed.profile.json", "optimize"),
    "gemm_draft": (ROOT / "kegen" / "suites" / "default" / "gemm", "gemm_seed.profile.json", "draft"),
}


def _context(store, case: str, knowledge: list[tuple[str, str]] | None = None):
    folder, profile, phase = CASES[case]
    problem = folder / "problem.py"
    run = new_run(store, str(problem))
    seed = (folder / "seed.py").read_text()
    root = store.add_node(run, parent_id=None, code=seed, operator="seed", description="seed")
    store.record_evaluation(root, status="ok", fitness=1.0, profile=json.loads((GOLDEN / profile).read_text()))
    bad = store.add_node(run, parent_id=root, code=seed + "\n# bad", operator="llm", description="bigger blocks")
    store.record_evaluation(bad, status="compile_error", message="local store overflow: 600 kB > 256 kB")
    info = ProblemInfo(path=problem, source=problem.read_text(), op_class=folder.name)
    ctx = ContextBuilder(store, run, info, OperatorConfig(kb_budget_chars=0)).build(Selection(root, phase=phase))
    if knowledge is not None:
        ctx.knowledge = knowledge
    if phase == "draft":  # the draft template is for a root that is not correct (else: edits of it)
        ctx.parent = replace(ctx.parent, status="failed")
    return ctx


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_prompt(store, case: str) -> None:
    name, _, user = render_prompt(_context(store, case))
    path = GOLDEN / f"{case}.prompt.md"
    if os.environ.get("KEGEN_UPDATE_GOLDEN"):
        path.write_text(user)
    assert user == path.read_text(), f"{case}: the prompt changed; see this test's docstring to update"
    assert name == f"{CASES[case][2]}.tmpl" and "/work/" not in user and "/tmp" not in user


def test_the_seed_prompt_says_which_pes_idle(store) -> None:
    _, _, user = render_prompt(_context(store, "softmax_optimize"))
    assert "grid (16, 1, 1) = 16 programs on 16 of 64 PEs (48 PEs idle)" in user
    assert "measured bottleneck: idle PEs (occupancy" in user
    assert "local store overflow" in user  # earlier attempts come with their error messages
    assert "seed.py:19" in user and "tl.load(x_row + cols" in user  # the hottest source lines


def test_draft_prompt_carries_the_reference_roofline_and_shapes(store) -> None:
    _, _, user = render_prompt(_context(store, "gemm_draft"))
    assert "minimum DRAM traffic 786.43 kB" in user and "roofline limit" in user and "get_inputs:" in user


def test_token_budget_shrinks_knowledge_then_attempts_then_profile(store) -> None:
    docs = [(f"doc {i}", "word " * 2000) for i in range(4)]  # ~11k characters each
    # knowledge_share=1.0: the documents may fill the prompt (by default they get a quarter of it)
    ctx = _context(store, "softmax_optimize", knowledge=docs)
    *_, full = build_prompt(ctx, budget_tokens=100_000, knowledge_share=1.0)
    assert full.fits and full.levels == {"profile": 0, "attempts": 0, "knowledge": 0, "failure": 0}
    *_, mid = build_prompt(ctx, budget_tokens=full.tokens - 3000, knowledge_share=1.0)
    assert mid.fits and mid.levels["profile"] == 0 and mid.levels["knowledge"] >= 1
    seen_profile_shrink = False
    for budget in range(full.tokens, 500, -250):
        _, system, user, f = build_prompt(ctx, budget_tokens=budget, knowledge_share=1.0)
        assert abs(f.tokens - estimate_tokens(system) - estimate_tokens(user)) <= 8  # per-part rounding
        if f.levels["attempts"] > 0:  # attempts shrink only after all knowledge is gone
            assert f.levels["knowledge"] == 4
        if f.levels["profile"] > 0:  # the profile shrinks last
            seen_profile_shrink = True
            assert f.levels["knowledge"] == 4 and f.levels["attempts"] == 1 and "(none selected)" in user
        if f.fits:
            assert f.tokens <= budget
    assert seen_profile_shrink and not f.fits  # below the fixed parts nothing fits; it says so
    assert "limited by idle PEs" in user  # the smallest profile is still the one-line diagnosis
