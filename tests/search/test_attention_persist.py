"""The persistent attention move (mutations/memory/attention_persist.py).

AST-level: the tile loop, its head-first tile order, the next tile's loads carried, the launch; which
kernels it refuses. Simulated: the rewritten kernels are correct against PyTorch when a program walks
several tiles, the last tile is ragged and some programs get one tile fewer than others.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from kegen.search.operators.mutations import MutationError
from kegen.search.operators.mutations.memory.attention import rewrite as exp2_rewrite
from kegen.search.operators.mutations.memory.attention_persist import attention_persist_mutations, rewrite
from kegen.search.operators.mutations.memory.attention_pipeline import rewrite as ahead_rewrite
from kegen.search.operators.offline import OfflineOperator
from kegen.suites import find_suite

PROBLEM = find_suite("production").select(["attention_fwd_fp16"]).problems[0]
SEED = PROBLEM.seed_path.read_text()


def _ahead_exp2() -> str:
    """The production seed after the score-ahead and exp2 moves (the search's path to its best)."""
    return exp2_rewrite(ahead_rewrite(SEED, "attention_kernel"), "attention_kernel")


def _kernel(src: str) -> str:
    return src[src.index("def attention_kernel"): src.index("class ModelNew")]


def test_the_kernel_walks_its_tiles_heads_first_and_carries_the_next_tiles_loads() -> None:
    out = rewrite(_ahead_exp2(), "attention_kernel")
    kernel = _kernel(out)
    assert "persist_g0, persist_g1):" in kernel
    lines = [ln.strip() for ln in kernel.splitlines()]
    assert lines[1:4] == [
        "persist_pid = tl.program_id(0)",
        "persist_nprog = tl.num_programs(0)",
        "persist_tiles = persist_g0 * persist_g1",
    ]
    assert lines[4].startswith("q_tile = tl.load(") and "(persist_pid < persist_tiles)" in lines[4]
    assert lines[5].startswith("kt_first_tile = tl.load(")
    walk = lines.index("for persist_tile in range(persist_pid, persist_tiles, persist_nprog):")
    assert lines[walk + 1: walk + 3] == ["pid_m = persist_tile // persist_g1", "bh = persist_tile % persist_g1"]
    assert "q = q_tile" in lines and "kt_first = kt_first_tile" in lines
    # the next tile's loads sit between the first product and the key loop
    key_loop = lines.index("for start in range(0, seq, BLOCK_N):")
    nxt = lines.index("persist_next = persist_tile + persist_nprog")
    assert lines.index("s_dot = tl.dot(q, kt_first)") < nxt < key_loop
    assert lines[nxt + 1].startswith("q_next_tile = tl.load(") and "(persist_next < persist_tiles)" in lines[nxt + 1]
    assert lines[nxt + 2].startswith("kt_first_next_tile = tl.load(")
    assert [ln for ln in lines if ln][-2:] == ["q_tile = q_next_tile", "kt_first_tile = kt_first_next_tile"]
    assert "tl.program_id(1)" not in kernel


def test_the_launch_runs_one_program_per_pe_and_passes_the_grid() -> None:
    out = rewrite(SEED, "attention_kernel")
    assert "PERSIST_PROGRAMS = 64" in out
    assert "persist_grid = grid\n" in out
    assert "attention_kernel[min(PERSIST_PROGRAMS, persist_grid[0] * persist_grid[1]),](" in out
    assert "persist_g0=persist_grid[0], persist_g1=persist_grid[1])" in out
    dual = SEED.replace("BLOCK_M=64, BLOCK_N=64)", "BLOCK_M=64, BLOCK_N=64, dual_core=True)")
    assert "[min(2 * PERSIST_PROGRAMS, persist_grid[0]" in rewrite(dual, "attention_kernel")


def test_the_query_block_variant_sets_the_block_and_the_grid_follows() -> None:
    moves = attention_persist_mutations(SEED)
    assert [m.name for m in moves] == [
        "attention_persist@attention_kernel",
        "attention_persist@attention_kernel/qfirst",
        "attention_persist@attention_kernel/q128",
        "attention_persist@attention_kernel/q128/qfirst",
    ]
    out = moves[2].apply(SEED)
    assert "BLOCK_M=128" in out and "grid = (triton.cdiv(seq, 128), batch * heads)" in out
    wide = SEED.replace("triton.cdiv(seq, 64)", "triton.cdiv(seq, 128)").replace("BLOCK_M=64", "BLOCK_M=128")
    assert [m.name for m in attention_persist_mutations(wide)] == [
        "attention_persist@attention_kernel", "attention_persist@attention_kernel/qfirst"]
    with pytest.raises(MutationError, match="already"):
        rewrite(wide, "attention_kernel", query_block=128)


def test_the_persistent_form_is_offered_once() -> None:
    out = rewrite(SEED, "attention_kernel")
    assert attention_persist_mutations(out) == []  # it reads the program count now


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # a 1-D grid: the tiles are not (query block, head)
        (("bh = tl.program_id(1)", "bh = pid_m % 2"), "program_id"),
        # an early return would skip the rest of the program's tiles
        (("    acc = acc / l_i[:, None]\n", "    if seq == 0:\n        return\n    acc = acc / l_i[:, None]\n"),
         "returns"),
        # two loops at the top level
        (("    acc = acc / l_i[:, None]\n", "    for t in range(2):\n        acc = acc * 1.0\n    acc = acc / l_i[:, None]\n"),
         "loops"),
        # Q's address reads a name assigned twice
        (("    base = bh * seq * head_dim\n", "    base = bh * seq * head_dim\n    base = base + 0\n"), "more than once"),
        # no exponential in the loop: not an online softmax
        (("tl.exp(", "tl.abs("), "online softmax"),
    ],
)
def test_other_kernels_are_refused(edit: tuple[str, str], why: str) -> None:
    assert edit[0] in SEED
    src = SEED.replace(*edit)
    with pytest.raises(MutationError, match=why):
        rewrite(src, "attention_kernel")
    assert attention_persist_mutations(src) == [] or why == "more than once"


def test_the_offline_operator_offers_it_on_mtia_only() -> None:
    from types import SimpleNamespace

    def names(target: str) -> list[str]:
        ctx = SimpleNamespace(parent_code=SEED, problem=SimpleNamespace(target=target, platform=target, path=None), profile=None)
        return [m.name for m in OfflineOperator.candidates(OfflineOperator.__new__(OfflineOperator), ctx)]

    assert "attention_persist@attention_kernel" in names("mtia")
    assert not any(n.startswith("attention_persist") for n in names("nvidia"))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["seed", "ahead_exp2", "unmasked_q"])
def test_the_persistent_kernels_are_correct_on_the_simulator(form: str, tmp_path: Path) -> None:
    """Two heads x two 64-query blocks (the second ragged: 80 queries) on three programs: one program
    walks two tiles, the others one; the carried loads of a missing next tile are masked off."""
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate

    problem = tmp_path / "attention.py"
    seq = 128 if form == "unmasked_q" else 80
    problem.write_text(PROBLEM.problem_path.read_text() + f"\n\nSEQ = {seq}\nHEADS = 2\nBATCH = 1\n")
    src = SEED if form == "seed" else _ahead_exp2()
    if form == "unmasked_q":
        src = re.sub(r"(q = tl\.load\([^\n]*?), mask=\(offs_m\[:, None\] < seq\) & dmask\[None, :\], other=0\.0\)",
                     r"\1)", src, count=1)
        assert "offs_d[None, :])\n" in src
    out = rewrite(src, "attention_kernel")
    assert "PERSIST_PROGRAMS = 64" in out
    out = out.replace("PERSIST_PROGRAMS = 64", "PERSIST_PROGRAMS = 3")
    r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
    assert r.status.value == "ok", f"{r.status} {r.message}"


def test_the_exp2_and_score_ahead_moves_apply_inside_the_tile_loop() -> None:
    """The moves compose in any order: on a persistent kernel the exp2 and score-ahead moves read the
    tile loop's body (`tile_scope`) and rewrite the key loop in it."""
    from kegen.search.operators.mutations.memory.attention import attention_mutations
    from kegen.search.operators.mutations.memory.attention_pipeline import attention_pipeline_mutations

    out = rewrite(SEED, "attention_kernel")
    (exp2,) = attention_mutations(out)
    out = exp2.apply(out)
    (ahead,) = attention_pipeline_mutations(out)
    out = ahead.apply(out)
    kernel = _kernel(out)
    walk = kernel.index("    for persist_tile in range(")
    assert kernel.index("        q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)\n") > walk
    assert "            s_next = tl.dot(q, kt_next)\n" in kernel and "tl.exp(" not in kernel
    # this tile's first K load and product come before the next tile's loads (the DMA queue is in order)
    assert kernel.index("kt_first = tl.load(") < kernel.index("persist_next = persist_tile + persist_nprog")
    assert attention_mutations(out) == [] and attention_pipeline_mutations(out) == []
    assert attention_persist_mutations(out) == []


CAUSAL_PROBLEM = '''"""Causal SDPA, fp32, 1 x 3 heads, 100 queries x 32."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(1, 3, 100, 32), torch.randn(1, 3, 100, 32), torch.randn(1, 3, 100, 32)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_the_drafting_templates_causal_kernel_is_correct_persistent(tmp_path: Path) -> None:
    """The drafting template (strided operands passed with `*x.stride()`, a key loop bounded by the
    causal mask, a query block from a module constant): 3 heads x 2 ragged query blocks on 2 programs."""
    pytest.importorskip("mtia_sim.simulator")
    from kegen.eval import EvalConfig, evaluate
    from kegen.search.operators.templates.attention import attention

    problem = tmp_path / "causal.py"
    problem.write_text(CAUSAL_PROBLEM)
    src = attention(["q", "k", "v"], "q", "k", "v", (1, 3, 100, 32), (9600, 3200, 32, 1), 100, 100, causal=True)
    moves = attention_persist_mutations(src)
    assert [m.name.split("@")[1] for m in moves] == [
        "kegen_attention_kernel", "kegen_attention_kernel/qfirst",
        "kegen_attention_kernel/q128", "kegen_attention_kernel/q128/qfirst"]
    for move in moves[:2]:  # both tile orders
        out = move.apply(src).replace("PERSIST_PROGRAMS = 64", "PERSIST_PROGRAMS = 2")
        r = evaluate(problem, out, config=EvalConfig(target="mtia", trials=1, profile=False, fresh_process=True))
        assert r.status.value == "ok", f"{move.name}: {r.status} {r.message}"


def test_block_moves_leave_the_persistent_query_block_alone() -> None:
    """The tile count is computed on the host from the query block: a block move that changed it in
    the kernel alone would leave rows uncomputed. The block reads as tiling a program id of unknown
    axis (the tile index of a `range(pid, tiles, num_programs)` loop), so no move changes it."""
    from kegen.search.operators.mutations.blocks import block_mutations, find_blocks, tile_mutations

    out = rewrite(SEED, "attention_kernel")
    (site,) = [s for s in find_blocks(out) if s.param == "BLOCK_M"]
    assert site.pid and site.axis is None
    assert not [m for m in block_mutations(out) + tile_mutations(out) if "BLOCK_M" in m.name]
    ctx = SimpleNamespace(parent_code=out, problem=SimpleNamespace(target="mtia", platform="mtia"), profile=None)
    names = [m.name for m in OfflineOperator.candidates(OfflineOperator.__new__(OfflineOperator), ctx)]
    assert not [n for n in names if n.startswith("BLOCK_M=")]
