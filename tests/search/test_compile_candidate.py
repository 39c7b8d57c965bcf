"""torch.compile's own kernels are a candidate of every search on a GPU target (issue 26): the hook in
`start_run`, with a fake drafter standing in for the GPU draft and the search's fake evaluator."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kegen.search import compile_candidate
from kegen.search.config import (
    EvalSliceConfig,
    OperatorConfig,
    PolicyConfig,
    SearchConfig,
    StoreConfig,
    TerminationConfig,
)
from kegen.search.loop import run_search
from tests.search.search_helpers import EXAMPLES

SEED = EXAMPLES / "softmax" / "seed.py"
# what the fake evaluator rewards: bigger blocks (the "compile" code here is 16x the seed's blocks)
FAST = SEED.read_text().replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 512")


def _config(tmp_path: Path, target: str, budget: int = 3) -> SearchConfig:
    return SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=SEED,
        out_dir=tmp_path / f"run-{target}",
        policy=PolicyConfig(name="greedy"),
        termination=TerminationConfig(max_evaluations=budget),
        eval=EvalSliceConfig(target=target, jobs=0, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "search.db", warm_start=False),
        progress=False,
        operator=OperatorConfig(kb_budget_chars=0),
    )


@pytest.fixture
def drafted(monkeypatch):
    calls: list[tuple[Path, str]] = []

    def fake(problem: Path, target: str) -> str:
        calls.append((problem, target))
        return FAST

    monkeypatch.setattr(compile_candidate, "gpu_drafter", fake)
    return calls


def test_nvidia_search_holds_the_compile_candidate_and_it_wins(tmp_path, store, drafted) -> None:
    r = run_search(_config(tmp_path, "nvidia", budget=2), store)  # the root and the compile candidate
    assert drafted == [((EXAMPLES / "softmax" / "problem.py").resolve(), "nvidia")]
    nodes = [n for n in store.nodes(r.run_id) if n.operator == compile_candidate.OPERATOR]
    assert len(nodes) == 1 and nodes[0].parent_id == r.root.id and nodes[0].code == FAST
    assert nodes[0].evaluated and nodes[0].fitness > 1.0  # evaluated like any candidate
    assert r.best is not None and r.best.id == nodes[0].id
    assert compile_candidate.compile_candidate_won(store, r.run_id, r.best.id)
    assert not compile_candidate.compile_candidate_won(store, r.run_id, r.root.id)


def test_a_search_never_ends_slower_than_the_compile_candidate(tmp_path, store, drafted) -> None:
    r = run_search(_config(tmp_path, "nvidia", budget=4), store)
    node = next(n for n in store.nodes(r.run_id) if n.operator == compile_candidate.OPERATOR)
    assert r.best is not None and r.best.fitness >= node.fitness > 1.0
    won = compile_candidate.compile_candidate_won(store, r.run_id, r.best.id)
    assert won == (r.best.id == node.id)


def test_other_targets_get_no_compile_candidate(tmp_path, store, drafted) -> None:
    r = run_search(_config(tmp_path, "mtia", budget=2), store)
    assert drafted == []
    assert all(n.operator != compile_candidate.OPERATOR for n in store.nodes(r.run_id))


def test_a_refused_draft_leaves_the_search_going_and_says_why(tmp_path, store, monkeypatch) -> None:
    def refuse(problem: Path, target: str) -> str:
        raise ValueError("drafting torch.compile's code for nvidia needs a CUDA device")

    monkeypatch.setattr(compile_candidate, "gpu_drafter", refuse)
    r = run_search(_config(tmp_path, "nvidia", budget=2), store)
    assert r.evaluations == 2
    assert all(n.operator != compile_candidate.OPERATOR for n in store.nodes(r.run_id))
    with store.transaction() as db:
        row = db.execute(
            "SELECT content FROM artifacts WHERE run_id = ? AND kind = 'compile_candidate'", (r.run_id,)
        ).fetchone()
    assert row is not None and "needs a CUDA device" in row[0]


def test_code_equal_to_the_seed_is_not_added_twice(tmp_path, store, monkeypatch) -> None:
    monkeypatch.setattr(compile_candidate, "gpu_drafter", lambda problem, target: SEED.read_text())
    r = run_search(_config(tmp_path, "nvidia", budget=2), store)
    assert all(n.operator != compile_candidate.OPERATOR for n in store.nodes(r.run_id))


def test_the_gpu_recorder_says_whether_the_compile_candidate_won(tmp_path, store, drafted) -> None:
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tools.record_production_gpu import _search_record

    r = run_search(_config(tmp_path, "nvidia", budget=2), store)
    args = argparse.Namespace(budget=2, search_time=60.0, policy="greedy")
    rec = _search_record(store, r, args, 1.0)
    assert rec["compile_candidate"] == {
        "present": True,
        "won": True,
        "fitness": pytest.approx(r.best.fitness),
    }
    json.dumps(rec)


def test_a_seed_that_is_a_gpu_draft_is_not_drafted_again(tmp_path, store, drafted) -> None:
    from kegen.inductor.gpu_draft import HEADER

    seed = tmp_path / "gpu_draft_seed.py"
    seed.write_text(HEADER.format(problem="problem.py", target="nvidia", device="H200") + SEED.read_text())
    config = _config(tmp_path, "nvidia", budget=2)
    from dataclasses import replace

    r = run_search(replace(config, seed=seed), store)
    assert drafted == []  # kegen tune seeds its searches with the GPU draft: no second Inductor compile
    assert all(n.operator != compile_candidate.OPERATOR for n in store.nodes(r.run_id))


def test_an_upcasting_reference_is_drafted_in_its_native_dtype_only_where_outputs_keep_their_dtype(
    tmp_path: Path,
) -> None:
    from kegen.bench.native_dtype import native_keeps_dtypes

    body = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return RESULT


def get_inputs():
    return [torch.randn(8, 4, dtype=torch.float16), torch.randn(4, 8, dtype=torch.float16)]


def get_init_inputs():
    return []
"""
    cast_back = tmp_path / "cast_back.py"
    cast_back.write_text(body.replace("RESULT", "(a.float() @ b.float()).to(a.dtype)"))
    stays_fp32 = tmp_path / "stays_fp32.py"
    stays_fp32.write_text(body.replace("RESULT", "a.float() @ b.float()"))
    assert native_keeps_dtypes(cast_back)
    assert not native_keeps_dtypes(stays_fp32)  # native fp16 would change the output's dtype
    int8_weight = tmp_path / "int8_weight.py"  # b.to(int8).float() stays float32 while a stays fp16
    int8_weight.write_text(body.replace("RESULT", "(a.float() @ b.to(torch.int8).float()).to(a.dtype)"))
    assert not native_keeps_dtypes(int8_weight)  # a mixed fp16 x fp32 GEMM (meta tensors do not check)
