"""Carrying a winner's change to the same group at another variant, and the search allocation."""

from __future__ import annotations

from pathlib import Path

from kegen.tune.carry import allocate_searches, apply_change, carry_winners, change_of, signature

SEED = """
MM_BLOCK_K = 32

class ModelNew:
    def forward(self, x):
        grid = (triton.cdiv({n}, 32),)
        kern[grid](x, buf0, {n}, XBLOCK=32)
        return buf0
"""


def _seed(n: int) -> str:
    return SEED.replace("{n}", str(n))


def test_change_replayed_at_other_sizes() -> None:
    winner = (
        _seed(1024)
        .replace("MM_BLOCK_K = 32", "MM_BLOCK_K = 64")
        .replace("XBLOCK=32)", "XBLOCK=32, num_stages=2)")
    )
    change = change_of(_seed(1024), winner)
    assert len(change) == 2
    out = apply_change(change, _seed(256))
    assert out is not None
    assert "MM_BLOCK_K = 64" in out and "kern[grid](x, buf0, 256, XBLOCK=32, num_stages=2)" in out
    assert "triton.cdiv(256, 32)" in out  # the size stays the variant's own


def test_change_that_does_not_fit_is_not_carried() -> None:
    # the winner changed XBLOCK 32 -> 16; a seed whose XBLOCK is 64 does not have the old line
    winner = _seed(1024).replace("cdiv(1024, 32)", "cdiv(1024, 16)").replace("XBLOCK=32", "XBLOCK=16")
    other = _seed(256).replace("cdiv(256, 32)", "cdiv(256, 64)").replace("XBLOCK=32", "XBLOCK=64")
    assert apply_change(change_of(_seed(1024), winner), other) is None
    out = apply_change(change_of(_seed(1024), winner), _seed(256))
    assert out is not None and "cdiv(256, 16)" in out and "XBLOCK=16" in out
    assert apply_change([], _seed(256)) is None


def _plans(tmp_path: Path) -> list[dict]:
    plans = []
    for k, n in enumerate((256, 1024)):
        groups = []
        for gi, kernel in enumerate(("addmm", "gelu", "addmm")):
            p = tmp_path / f"v{k}g{gi}.py"
            p.write_text(_seed(n))
            groups.append({"name": f"g{gi}_{kernel}", "kernel": kernel, "seed_path": str(p)})
        plans.append({"groups": groups})
    return plans


def test_one_search_per_group_then_carried(tmp_path: Path) -> None:
    plans = _plans(tmp_path)
    assert [signature(plans[0], i) for i in range(3)] == ["addmm#0", "gelu#0", "addmm#1"]
    gains = {"0/0": 1.0, "1/0": 3.0, "0/1": 0.5, "1/1": 0.4, "0/2": 0.1, "1/2": 0.1}
    alloc = allocate_searches(4, gains, plans, depth=2)
    # addmm#0 at variant 1 (most time), gelu#0 at variant 0; addmm#1 gets nothing
    assert alloc == {"0/0": 0, "1/0": 2, "0/1": 2, "1/1": 0, "0/2": 0, "1/2": 0}
    winner = _seed(1024).replace("MM_BLOCK_K = 32", "MM_BLOCK_K = 64")
    found = {
        "1/0": {"source": winner, "speedup": 1.5, "change": "BLOCK_K 32 -> 64"},
        "0/1": {"source": None, "speedup": 1.0},
    }
    carried = carry_winners(found, plans)
    assert set(carried) == {"0/0"} and carried["0/0"]["carried"]
    assert "MM_BLOCK_K = 64" in carried["0/0"]["source"] and "cdiv(256, 32)" in carried["0/0"]["source"]


GROUP = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn({rows}, {cols})]


def get_init_inputs():
    return []
"""


def test_a_winner_from_the_template_draft_is_carried_from_the_other_variants_template(tmp_path: Path) -> None:
    """The search began from kegen's template draft beside Inductor's seed: the winner's change is
    replayed on the other variant's template draft (its sizes its own), not on that variant's seed."""
    from kegen.search.operators.drafting import analyze

    groups = []
    for k, (rows, cols) in enumerate(((64, 300), (8, 3000))):
        problem = tmp_path / f"v{k}.py"
        problem.write_text(GROUP.format(rows=rows, cols=cols))
        seed = tmp_path / f"v{k}_seed.py"
        seed.write_text(_seed(rows * cols))  # an Inductor-like seed the template shares nothing with
        groups.append({"name": "g0_softmax", "kernel": "softmax", "problem": str(problem), "seed_path": str(seed)})
    plans = [{"groups": [g]} for g in groups]
    template0 = analyze(Path(groups[0]["problem"])).source
    template1 = analyze(Path(groups[1]["problem"])).source
    assert template0 and template1 and "BLOCK_SIZE = 512" in template0 and "BLOCK_SIZE = 4096" in template1
    winner = template0.replace("SM_ROWS = 16", "SM_ROWS = 4")
    out = carry_winners({"0/0": {"source": winner, "speedup": 1.3}}, plans)
    assert set(out) == {"1/0"}
    src = out["1/0"]["source"]
    assert "SM_ROWS = 4" in src and "BLOCK_SIZE = 4096" in src  # the change, at variant 1's own block
    # the template itself winning is carried as the other variant's template
    out = carry_winners({"0/0": {"source": template0, "speedup": 1.2}}, plans)
    assert out["1/0"]["source"] == template1
