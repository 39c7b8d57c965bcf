"""What the graph store keeps beside the tree: prompts, LLM calls and artifacts (a `GraphStore` mixin).

An LLM call row holds its usage (tokens, estimated or from the server), latency, attempts, how it
ended (`finish_reason`, `reply_kind`: see kegen.search.operators.llm.replies) and the reply text;
calls abandoned when a search stopped have no node. Databases written before these columns existed
are migrated in place (columns added, old rows read as unknown).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

RECORDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS prompts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id INTEGER NOT NULL REFERENCES nodes(id),
    template TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS llm_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    node_id INTEGER REFERENCES nodes(id),
    model TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    latency_s REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL,               -- ok | error
    error TEXT,
    reply TEXT,
    created_at REAL NOT NULL,
    finish_reason TEXT,                 -- stop | length | ... (None: the stream ended without one)
    reply_kind TEXT,                    -- code | echo | truncated | no_code | ... | timeout | ...
    tokens_estimated INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    node_id INTEGER REFERENCES nodes(id),
    kind TEXT NOT NULL,
    path TEXT,
    content TEXT,
    created_at REAL NOT NULL
);
"""

_ADDED_COLUMNS = {
    "finish_reason": "TEXT",
    "reply_kind": "TEXT",
    "tokens_estimated": "INTEGER NOT NULL DEFAULT 0",
}


def migrate_records(db: sqlite3.Connection) -> None:
    """Add the LLM-call columns a database written by an older kegen lacks."""
    have = {r[1] for r in db.execute("PRAGMA table_info(llm_calls)")}
    for name, decl in _ADDED_COLUMNS.items():
        if name not in have:
            db.execute(f"ALTER TABLE llm_calls ADD COLUMN {name} {decl}")


class RunRecords:
    """Prompts, LLM calls and artifacts of a run (mixed into `GraphStore`, which owns the connection)."""

    _db: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:  # provided by GraphStore
        raise NotImplementedError

    # ---- prompts ------------------------------------------------------------------------------
    def add_prompt(self, node_id: int, template: str, text: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO prompts (node_id, template, text, created_at) VALUES (?, ?, ?, ?)",
                (node_id, template, text, time.time()),
            )

    def prompts(self, node_id: int) -> list[tuple[str, str]]:
        return [
            (r[0], r[1])
            for r in self._db.execute(
                "SELECT template, text FROM prompts WHERE node_id = ? ORDER BY id", (node_id,)
            )
        ]

    # ---- LLM calls ----------------------------------------------------------------------------
    def add_llm_call(
        self,
        run_id: str,
        node_id: int | None,
        *,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        attempts: int,
        status: str,
        error: str | None = None,
        reply: str | None = None,
        finish_reason: str | None = None,
        reply_kind: str | None = None,
        tokens_estimated: bool = False,
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO llm_calls (run_id, node_id, model, prompt_tokens, completion_tokens, cost,"
                " latency_s, attempts, status, error, reply, created_at, finish_reason, reply_kind,"
                " tokens_estimated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    node_id,
                    model,
                    prompt_tokens,
                    completion_tokens,
                    cost,
                    latency_s,
                    attempts,
                    status,
                    error,
                    reply,
                    time.time(),
                    finish_reason,
                    reply_kind,
                    int(tokens_estimated),
                ),
            )

    def llm_calls(self, run_id: str, node_id: int | None = None) -> list[dict[str, Any]]:
        """The run's LLM calls (or one node's), oldest first, as dicts of the table's columns."""
        if node_id is None:
            rows: Iterator[sqlite3.Row] = self._db.execute(
                "SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", (run_id,)
            )
        else:
            rows = self._db.execute(
                "SELECT * FROM llm_calls WHERE run_id = ? AND node_id = ? ORDER BY id", (run_id, node_id)
            )
        return [dict(r) for r in rows]

    def llm_usage(self, run_id: str) -> dict[str, float]:
        r = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),"
            " COALESCE(SUM(cost), 0), COALESCE(SUM(latency_s), 0), COALESCE(SUM(tokens_estimated), 0)"
            " FROM llm_calls WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        return {
            "calls": r[0],
            "prompt_tokens": r[1],
            "completion_tokens": r[2],
            "tokens": r[1] + r[2],
            "cost": r[3],
            "latency_s": r[4],
            "estimated_calls": r[5],
        }

    def reply_kinds(self, run_id: str) -> dict[str, int]:
        """How many calls ended as each reply kind (calls stored before kinds existed: `unknown`)."""
        return {
            str(k or "unknown"): int(n)
            for k, n in self._db.execute(
                "SELECT reply_kind, COUNT(*) FROM llm_calls WHERE run_id = ? GROUP BY reply_kind"
                " ORDER BY COUNT(*) DESC",
                (run_id,),
            )
        }

    # ---- artifacts ----------------------------------------------------------------------------
    def add_artifact(
        self,
        run_id: str,
        node_id: int | None,
        kind: str,
        *,
        path: str | None = None,
        content: str | None = None,
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO artifacts (run_id, node_id, kind, path, content, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, node_id, kind, path, content, time.time()),
            )

    def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in self._db.execute("SELECT * FROM artifacts WHERE run_id = ? ORDER BY id", (run_id,))
        ]
