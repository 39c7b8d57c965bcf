"""The graph store: schema, recursive tree queries, atomic evaluations, resume after a kill, warm start."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from kegen.search.config import EvalSliceConfig, PolicyConfig, SearchConfig, StoreConfig, TerminationConfig
from kegen.search.loop import SearchDriver, run_search
from kegen.search.store import GraphStore
from tests.search.search_helpers import EXAMPLES, HERE, ROOT, fake_evolve_argv, new_run


def _tree(store: GraphStore) -> tuple[str, dict[str, int]]:
    """root -> a -> (a1, a2 -> a21), root -> b."""
    run = new_run(store)
    ids: dict[str, int] = {}
    ids["root"] = store.add_node(run, parent_id=None, code="root", operator="seed")
    ids["a"] = store.add_node(run, parent_id=ids["root"], code="a", operator="offline")
    ids["b"] = store.add_node(run, parent_id=ids["root"], code="b", operator="offline")
    ids["a1"] = store.add_node(run, parent_id=ids["a"], code="a1", operator="offline")
    ids["a2"] = store.add_node(run, parent_id=ids["a"], code="a2", operator="offline")
    ids["a21"] = store.add_node(run, parent_id=ids["a2"], code="a21", operator="offline")
    return run, ids


def test_wal_and_tables(store) -> None:
    mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    tables = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "nodes", "evaluations", "prompts", "llm_calls", "artifacts"} <= tables


def test_recursive_queries(store) -> None:
    run, ids = _tree(store)
    assert [n.id for n in store.ancestors(ids["a21"])] == [ids["a2"], ids["a"], ids["root"]]
    assert store.ancestors(ids["root"]) == []
    assert {n.id for n in store.subtree(ids["a"])} == {ids["a"], ids["a1"], ids["a2"], ids["a21"]}
    assert [n.id for n in store.siblings(ids["a1"])] == [ids["a2"]]
    assert store.node(ids["a21"]).depth == 3
    for name, score in (("root", 1.0), ("a", 2.0), ("b", 0.5), ("a1", 3.0), ("a2", 0.0)):
        store.record_evaluation(ids[name], status="ok" if name != "a2" else "incorrect", fitness=score)
    assert [n.id for n in store.best(run, k=2)] == [ids["a1"], ids["a"]]
    store.backup(ids["a1"], 3.0)
    assert store.node(ids["root"]).visits == 1 and store.node(ids["a"]).value_sum == 3.0
    assert store.node(ids["b"]).visits == 0
    assert [n.id for n in store.pending(run)] == [ids["a21"]]


def test_evaluation_is_atomic_and_never_repeated(store) -> None:
    run, ids = _tree(store)
    store.record_evaluation(ids["a"], status="ok", fitness=1.5, profile={"bound": "memory"})
    with pytest.raises(ValueError, match="already evaluated"):
        store.record_evaluation(ids["a"], status="ok", fitness=9.0)
    ev = store.evaluation(ids["a"])
    assert ev is not None and ev.fitness == 1.5 and ev.profile == {"bound": "memory"}
    # a failing write leaves no half-evaluated node
    with pytest.raises(sqlite3.Error), store.transaction() as db:
        db.execute("UPDATE nodes SET status = 'done' WHERE id = ?", (ids["b"],))
        db.execute("INSERT INTO no_such_table VALUES (1)")
    assert store.node(ids["b"]).status == "pending"


def test_llm_usage_and_prompts(store) -> None:
    run, ids = _tree(store)
    store.add_prompt(ids["a"], "optimize.tmpl", "make it fast")
    store.add_llm_call(
        run,
        ids["a"],
        model="m",
        prompt_tokens=100,
        completion_tokens=20,
        cost=0.01,
        latency_s=0.5,
        attempts=2,
        status="ok",
    )
    store.add_llm_call(
        run,
        ids["b"],
        model="m",
        prompt_tokens=50,
        completion_tokens=5,
        cost=0.005,
        latency_s=0.1,
        attempts=1,
        status="ok",
    )
    u = store.llm_usage(run)
    assert u["tokens"] == 175 and abs(u["cost"] - 0.015) < 1e-12 and u["calls"] == 2
    assert store.prompts(ids["a"]) == [("optimize.tmpl", "make it fast")]


def _config(tmp_path, **kw) -> SearchConfig:
    return SearchConfig(
        problem=EXAMPLES / "softmax" / "problem.py",
        seed=EXAMPLES / "softmax" / "seed.py",
        out_dir=kw.pop("out_dir", tmp_path / "run"),
        policy=PolicyConfig(name="uct"),
        termination=TerminationConfig(max_evaluations=kw.pop("budget", 6)),
        eval=EvalSliceConfig(jobs=0, evaluator="tests.search.fake_eval:evaluate"),
        store=StoreConfig(db=tmp_path / "search.db", warm_start=kw.pop("warm", False)),
        progress=False,
        **kw,
    )


def test_resume_after_kill_mid_evaluation(tmp_path) -> None:
    log = tmp_path / "evals.log"
    env = dict(
        os.environ,
        PYTHONPATH=f"{HERE}{os.pathsep}{ROOT}",
        KEGEN_FAKE_EVAL_LOG=str(log),
        KEGEN_FAKE_EVAL_SLEEP="0.3",
    )
    argv = fake_evolve_argv("softmax", tmp_path / "search.db", tmp_path / "run", 8, "--no-warm-start")
    cmd = [sys.executable, "-m", "kegen", *argv]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    killed = False
    while time.time() < deadline and proc.poll() is None:
        lines = log.read_text().splitlines() if log.exists() else []
        ends = sum(1 for x in lines if x.startswith("end"))
        if ends >= 3 and lines[-1].startswith("start"):
            os.kill(proc.pid, signal.SIGKILL)  # mid-evaluation
            killed = True
            break
        time.sleep(0.02)
    proc.wait(timeout=30)
    assert killed, f"the search ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    store = GraphStore(tmp_path / "search.db")
    (run,) = store.list_runs()
    done_before = {n.id for n in store.nodes(run.id, "done")}
    assert store.pending(run.id), "the node being evaluated at the kill is kept as pending"
    os.environ["KEGEN_FAKE_EVAL_LOG"] = str(log)
    try:
        driver = SearchDriver(_config(tmp_path, budget=8, resume=run.id), store)
        result = driver.run()
    finally:
        del os.environ["KEGEN_FAKE_EVAL_LOG"]
    nodes = store.nodes(run.id)
    assert all(n.evaluated for n in nodes) and done_before <= {n.id for n in nodes}
    assert result.evaluations == 8 and len(nodes) == 9
    ends = Counter(x.split()[1] for x in log.read_text().splitlines() if x.startswith("end"))
    assert all(ends[n.code_hash] == 1 for n in nodes), "every node evaluated exactly once"
    assert store.get_run(run.id).status == "finished"
    # what the operator learned before the kill was replayed: one gain per evaluated child
    assert sum(len(g) for g in driver.operator.gains.values()) == 8


def test_a_resume_keeps_the_budget_when_more_nodes_are_pending(tmp_path, store) -> None:
    """A search stopped with many children written but not evaluated (a deadline with every job
    busy) resumes to its budget, not past it: the rest stay pending."""
    first = run_search(_config(tmp_path, budget=3), store)
    assert first.evaluations == 3
    root = next(n for n in store.nodes(first.run_id) if n.parent_id is None)
    for i in range(4):
        store.add_node(first.run_id, parent_id=root.id, code=f"{root.code}\n# variant {i}\n", operator="test")
    resumed = SearchDriver(_config(tmp_path, budget=5, resume=first.run_id), store).run()
    assert resumed.evaluations == 5
    assert len(store.pending(first.run_id)) == 2


def test_warm_start_from_past_run(tmp_path, store) -> None:
    first = run_search(_config(tmp_path, budget=4), store)
    assert first.best is not None and first.best.parent_id is not None
    second = run_search(_config(tmp_path, budget=2, warm=True, out_dir=tmp_path / "run2"), store)
    warm = [n for n in store.nodes(second.run_id) if n.operator == "warm_start"]
    assert warm and warm[0].code == first.best.code
    assert second.best is not None and second.best.fitness >= first.best.fitness - 1e-9
