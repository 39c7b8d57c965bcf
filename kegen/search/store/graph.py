"""The search graph in SQLite (WAL): runs, nodes, evaluations, prompts, LLM calls, artifacts.

A node is written (status `pending`) before it is evaluated and its evaluation is written in the
same transaction that marks it `done`, so a search killed at any moment resumes without losing an
evaluated node or evaluating one twice. Tree queries (ancestors, subtree) are recursive CTEs.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kegen.search.store.queries import TreeQueries
from kegen.search.store.records import RECORDS_SCHEMA, RunRecords, migrate_records
from kegen.search.store.rows import SCHEMA, Run, code_hash


class GraphStore(TreeQueries, RunRecords):
    """The search graph of every run in one SQLite file (WAL journal, safe for one writer process).

    Queries are `TreeQueries` (store.queries); prompts, LLM calls and artifacts are kept by
    `RunRecords` (store.records)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA + RECORDS_SCHEMA)
        migrate_records(self._db)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: everything inside commits together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # ---- runs -------------------------------------------------------------------------------
    def create_run(
        self,
        *,
        problem_path: str,
        problem_key: str,
        target: str,
        machine: str,
        seed_hash: str | None,
        config: dict[str, Any],
        out_dir: str | None,
        run_id: str | None = None,
    ) -> str:
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        with self.transaction() as db:
            db.execute(
                "INSERT INTO runs (id, problem_path, problem_key, target, machine, seed_hash, config_json,"
                " out_dir, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    problem_path,
                    problem_key,
                    target,
                    machine,
                    seed_hash,
                    json.dumps(config),
                    out_dir,
                    time.time(),
                ),
            )
        return run_id

    def get_run(self, run_id: str) -> Run:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self._db.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 5")]
            hint = f" (recent runs: {', '.join(known)})" if known else " (the database has no runs)"
            raise KeyError(f"no run {run_id!r} in {self.path}{hint}")
        return Run(
            id=row["id"],
            problem_path=row["problem_path"],
            problem_key=row["problem_key"],
            target=row["target"],
            machine=row["machine"],
            seed_hash=row["seed_hash"],
            config=json.loads(row["config_json"]),
            status=row["status"],
            stop_reason=row["stop_reason"],
            out_dir=row["out_dir"],
            created_at=row["created_at"],
            finished_at=row["finished_at"],
        )

    def list_runs(self, problem_key: str | None = None) -> list[Run]:
        if problem_key is None:
            rows = self._db.execute("SELECT id FROM runs ORDER BY created_at").fetchall()
        else:
            rows = self._db.execute(
                "SELECT id FROM runs WHERE problem_key = ? ORDER BY created_at", (problem_key,)
            ).fetchall()
        return [self.get_run(r[0]) for r in rows]

    def finish_run(self, run_id: str, stop_reason: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE runs SET status = 'finished', stop_reason = ?, finished_at = ? WHERE id = ?",
                (stop_reason, time.time(), run_id),
            )

    def reopen_run(self, run_id: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE runs SET status = 'running', stop_reason = NULL, finished_at = NULL WHERE id = ?",
                (run_id,),
            )

    # ---- nodes ------------------------------------------------------------------------------
    def add_node(
        self,
        run_id: str,
        *,
        parent_id: int | None,
        code: str | None,
        operator: str,
        description: str = "",
        target: str = "mtia",
        island: int | None = None,
    ) -> int:
        """Insert a pending node (its code is kept so a resumed search evaluates it, not rewrites it)."""
        with self.transaction() as db:
            depth, parent_island = 0, 0
            if parent_id is not None:
                prow = db.execute("SELECT depth, island FROM nodes WHERE id = ?", (parent_id,)).fetchone()
                if prow is None:
                    raise KeyError(f"parent node {parent_id} does not exist")
                depth, parent_island = prow["depth"] + 1, prow["island"]
            cur = db.execute(
                "INSERT INTO nodes (run_id, parent_id, depth, code, code_hash, status, operator, description,"
                " target, island, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
                (
                    run_id,
                    parent_id,
                    depth,
                    code,
                    code_hash(code) if code else None,
                    operator,
                    description,
                    target,
                    parent_island if island is None else island,
                    time.time(),
                ),
            )
            return int(cur.lastrowid or 0)

    def record_evaluation(
        self,
        node_id: int,
        *,
        status: str,
        message: str = "",
        fitness: float = 0.0,
        speedup: float | None = None,
        candidate_time_s: float | None = None,
        baseline_time_s: float | None = None,
        roofline_fraction: float | None = None,
        metrics: dict[str, Any] | None = None,
        profile: dict[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> None:
        """Store a node's evaluation and mark it done, atomically. Evaluating a done node is an error."""
        now = time.time()
        is_bug = status != "ok"
        with self.transaction() as db:
            row = db.execute("SELECT status FROM nodes WHERE id = ?", (node_id,)).fetchone()
            if row is None:
                raise KeyError(f"node {node_id} does not exist")
            if row["status"] == "done":
                raise ValueError(f"node {node_id} is already evaluated; evaluations are never repeated")
            db.execute(
                "INSERT INTO evaluations (node_id, status, message, fitness, speedup, candidate_time_s,"
                " baseline_time_s, roofline_fraction, metrics_json, profile_json, duration_s, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    node_id,
                    status,
                    message,
                    fitness,
                    speedup,
                    candidate_time_s,
                    baseline_time_s,
                    roofline_fraction,
                    json.dumps(metrics or {}, default=str),
                    json.dumps(profile or {}, default=str),
                    duration_s,
                    now,
                ),
            )
            db.execute(
                "UPDATE nodes SET status = 'done', verdict = ?, score = ?, speedup = ?, is_bug = ?,"
                " evaluated_at = ? WHERE id = ?",
                (status, fitness, speedup, int(is_bug), now, node_id),
            )

    def backup(self, node_id: int, value: float) -> None:
        """Add one visit with `value` to the node and every ancestor (UCT's backpropagation)."""
        with self.transaction() as db:
            db.execute(
                "WITH RECURSIVE anc(id, parent_id) AS ("
                " SELECT id, parent_id FROM nodes WHERE id = ?"
                " UNION ALL SELECT n.id, n.parent_id FROM nodes n JOIN anc ON n.id = anc.parent_id)"
                " UPDATE nodes SET visits = visits + 1, value_sum = value_sum + ?"
                " WHERE id IN (SELECT id FROM anc)",
                (node_id, value),
            )
