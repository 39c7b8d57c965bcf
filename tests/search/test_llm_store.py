"""LLM calls in the graph store: the new columns, reply-kind counts, and databases from older kegen."""

from __future__ import annotations

import sqlite3

from kegen.search.store import GraphStore
from tests.search.search_helpers import new_run

OLD_LLM_CALLS = """
CREATE TABLE llm_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, node_id INTEGER, model TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0, latency_s REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL, error TEXT, reply TEXT, created_at REAL NOT NULL);
INSERT INTO llm_calls (run_id, node_id, model, prompt_tokens, completion_tokens, status, created_at)
    VALUES ('old', NULL, 'm', 10, 5, 'ok', 0);
"""


def test_calls_record_finish_reason_kind_and_estimates(store) -> None:
    run = new_run(store, "p.py")
    node = store.add_node(run, parent_id=None, code="x = 1", operator="seed")
    store.add_llm_call(
        run, node, model="m", prompt_tokens=100, completion_tokens=7, cost=0.0, latency_s=3.0, attempts=1,
        status="error", error="deadline", reply="partial", finish_reason=None, reply_kind="timeout",
        tokens_estimated=True,
    )  # fmt: skip
    store.add_llm_call(
        run, None, model="m", prompt_tokens=50, completion_tokens=2, cost=0.0, latency_s=1.0, attempts=1,
        status="ok", finish_reason="length", reply_kind="truncated",
    )  # fmt: skip
    (call,) = store.llm_calls(run, node)
    assert (call["reply_kind"], call["finish_reason"], call["tokens_estimated"]) == ("timeout", None, 1)
    assert store.reply_kinds(run) == {"timeout": 1, "truncated": 1}
    usage = store.llm_usage(run)
    assert usage["tokens"] == 159 and usage["estimated_calls"] == 1 and usage["calls"] == 2


def test_an_older_database_is_migrated(tmp_path) -> None:
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(OLD_LLM_CALLS)
    con.close()
    store = GraphStore(db)
    try:
        (call,) = store.llm_calls("old")
        assert call["reply_kind"] is None and call["tokens_estimated"] == 0
        assert store.reply_kinds("old") == {"unknown": 1}
    finally:
        store.close()
