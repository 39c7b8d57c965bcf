"""The search graph in SQLite (WAL): runs, nodes, evaluations, prompts, LLM calls, artifacts.

A node is written (status `pending`) before it is evaluated and its evaluation is written in the
same transaction that marks it `done`, so a search killed at any moment resumes without losing an
evaluated node or evaluating one twice. Tree queries (ancestors, subtree) are recursive CTEs.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kegen.search.store_records import RECORDS_SCHEMA, RunRecords, migrate_records

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    problem_path TEXT NOT NULL,
    problem_key TEXT NOT NULL,          -- hash of problem source + input shapes + target/machine
    target TEXT NOT NULL,
    machine TEXT NOT NULL,
    seed_hash TEXT,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',   -- running | finished
    stop_reason TEXT,
    out_dir TEXT,
    created_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS runs_problem ON runs(problem_key);
CREATE TABLE IF NOT EXISTS nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    parent_id INTEGER REFERENCES nodes(id),
    depth INTEGER NOT NULL DEFAULT 0,
    code TEXT,
    code_hash TEXT,
    status TEXT NOT NULL,               -- pending | done
    verdict TEXT,                       -- ok | compile_error | ... | no_code | invalid_code
    score REAL,                         -- fitness (0 when not correct)
    speedup REAL,
    is_bug INTEGER NOT NULL DEFAULT 0,
    operator TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    target TEXT NOT NULL,
    island INTEGER NOT NULL DEFAULT 0,
    visits INTEGER NOT NULL DEFAULT 0,
    value_sum REAL NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    evaluated_at REAL
);
CREATE INDEX IF NOT EXISTS nodes_run ON nodes(run_id, status);
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent_id);
CREATE INDEX IF NOT EXISTS nodes_hash ON nodes(run_id, code_hash);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id INTEGER NOT NULL UNIQUE REFERENCES nodes(id),
    status TEXT NOT NULL,
    message TEXT,
    fitness REAL NOT NULL,
    speedup REAL,
    candidate_time_s REAL,
    baseline_time_s REAL,
    roofline_fraction REAL,
    metrics_json TEXT NOT NULL DEFAULT '{}',
    profile_json TEXT NOT NULL DEFAULT '{}',
    duration_s REAL,
    created_at REAL NOT NULL
);
"""

FAILED_WITHOUT_EVAL = ("no_code", "invalid_code")


def code_hash(code: str) -> str:
    """A content hash of candidate source (whitespace at line ends ignored)."""
    norm = "\n".join(line.rstrip() for line in code.strip().splitlines())
    return hashlib.sha256(norm.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Node:
    """One candidate in the search tree."""

    id: int
    run_id: str
    parent_id: int | None
    depth: int
    code: str | None
    code_hash: str | None
    status: str
    verdict: str | None
    score: float | None
    speedup: float | None
    is_bug: bool
    operator: str
    description: str
    target: str
    island: int
    visits: int
    value_sum: float
    created_at: float
    evaluated_at: float | None

    @property
    def evaluated(self) -> bool:
        return self.status == "done"

    @property
    def correct(self) -> bool:
        return self.status == "done" and not self.is_bug

    @property
    def fitness(self) -> float:
        return float(self.score or 0.0)


@dataclass(frozen=True)
class Evaluation:
    """The stored outcome of evaluating one node."""

    node_id: int
    status: str
    message: str
    fitness: float
    speedup: float | None
    candidate_time_s: float | None
    baseline_time_s: float | None
    roofline_fraction: float | None
    metrics: dict[str, Any]
    profile: dict[str, Any]
    duration_s: float | None
    created_at: float


@dataclass(frozen=True)
class Run:
    id: str
    problem_path: str
    problem_key: str
    target: str
    machine: str
    seed_hash: str | None
    config: dict[str, Any]
    status: str
    stop_reason: str | None
    out_dir: str | None
    created_at: float
    finished_at: float | None


_NODE_COLS = ", ".join(Node.__dataclass_fields__)


class GraphStore(RunRecords):
    """The search graph of every run in one SQLite file (WAL journal, safe for one writer process).

    Prompts, LLM calls and artifacts are kept by `RunRecords` (kegen.search.store_records)."""

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

    def node(self, node_id: int) -> Node:
        row = self._db.execute(f"SELECT {_NODE_COLS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise KeyError(f"node {node_id} does not exist")
        return _node(row)

    def nodes(self, run_id: str, status: str | None = None) -> list[Node]:
        q = f"SELECT {_NODE_COLS} FROM nodes WHERE run_id = ?"
        args: tuple[Any, ...] = (run_id,)
        if status is not None:
            q += " AND status = ?"
            args += (status,)
        return [_node(r) for r in self._db.execute(q + " ORDER BY id", args)]

    def root(self, run_id: str) -> Node | None:
        row = self._db.execute(
            f"SELECT {_NODE_COLS} FROM nodes WHERE run_id = ? AND parent_id IS NULL ORDER BY id LIMIT 1",
            (run_id,),
        ).fetchone()
        return _node(row) if row else None

    def pending(self, run_id: str) -> list[Node]:
        """Nodes written but not evaluated (what a resumed search evaluates first)."""
        return self.nodes(run_id, status="pending")

    def children(self, node_id: int) -> list[Node]:
        return [
            _node(r)
            for r in self._db.execute(
                f"SELECT {_NODE_COLS} FROM nodes WHERE parent_id = ? ORDER BY id", (node_id,)
            )
        ]

    def siblings(self, node_id: int) -> list[Node]:
        """Other children of this node's parent."""
        return [
            _node(r)
            for r in self._db.execute(
                f"SELECT {_NODE_COLS} FROM nodes WHERE parent_id = (SELECT parent_id FROM nodes WHERE id = ?)"
                " AND id != ? ORDER BY id",
                (node_id, node_id),
            )
        ]

    def ancestors(self, node_id: int) -> list[Node]:
        """The path from the node's parent up to the root (nearest first), by a recursive query."""
        rows = self._db.execute(
            "WITH RECURSIVE anc(id, parent_id, k) AS ("
            " SELECT id, parent_id, 0 FROM nodes WHERE id = ?"
            " UNION ALL SELECT n.id, n.parent_id, anc.k + 1 FROM nodes n JOIN anc ON n.id = anc.parent_id)"
            f" SELECT {', '.join('n.' + c for c in Node.__dataclass_fields__)} FROM anc JOIN nodes n"
            " ON n.id = anc.id WHERE anc.k > 0 ORDER BY anc.k",
            (node_id,),
        ).fetchall()
        return [_node(r) for r in rows]

    def subtree(self, node_id: int) -> list[Node]:
        """The node and all its descendants, by a recursive query."""
        rows = self._db.execute(
            "WITH RECURSIVE sub(id) AS (SELECT ?"
            " UNION ALL SELECT n.id FROM nodes n JOIN sub ON n.parent_id = sub.id)"
            f" SELECT {', '.join('n.' + c for c in Node.__dataclass_fields__)} FROM nodes n"
            " WHERE n.id IN (SELECT id FROM sub) ORDER BY n.id",
            (node_id,),
        ).fetchall()
        return [_node(r) for r in rows]

    def best(self, run_id: str, k: int = 1) -> list[Node]:
        """The k correct nodes with the highest fitness (ties: the earliest)."""
        return [
            _node(r)
            for r in self._db.execute(
                f"SELECT {_NODE_COLS} FROM nodes WHERE run_id = ? AND status = 'done' AND is_bug = 0"
                " ORDER BY score DESC, id ASC LIMIT ?",
                (run_id, k),
            )
        ]

    def find_by_hash(self, run_id: str, h: str) -> Node | None:
        row = self._db.execute(
            f"SELECT {_NODE_COLS} FROM nodes WHERE run_id = ? AND code_hash = ?"
            " AND status = 'done' ORDER BY id LIMIT 1",
            (run_id, h),
        ).fetchone()
        return _node(row) if row else None

    def evaluation(self, node_id: int) -> Evaluation | None:
        r = self._db.execute("SELECT * FROM evaluations WHERE node_id = ?", (node_id,)).fetchone()
        if r is None:
            return None
        return Evaluation(
            node_id=r["node_id"],
            status=r["status"],
            message=r["message"] or "",
            fitness=r["fitness"],
            speedup=r["speedup"],
            candidate_time_s=r["candidate_time_s"],
            baseline_time_s=r["baseline_time_s"],
            roofline_fraction=r["roofline_fraction"],
            metrics=json.loads(r["metrics_json"]),
            profile=json.loads(r["profile_json"]),
            duration_s=r["duration_s"],
            created_at=r["created_at"],
        )

    def evaluated_count(self, run_id: str) -> int:
        return int(
            self._db.execute(
                "SELECT COUNT(*) FROM nodes WHERE run_id = ? AND status = 'done'", (run_id,)
            ).fetchone()[0]
        )

    # ---- warm start ---------------------------------------------------------------------------
    def best_from_past_runs(self, problem_key: str, exclude_run: str, k: int) -> list[tuple[Node, Run]]:
        """The best correct nodes of earlier runs of the same problem/shape/target."""
        rows = self._db.execute(
            f"SELECT {', '.join('n.' + c for c in Node.__dataclass_fields__)} FROM nodes n JOIN runs r"
            " ON r.id = n.run_id WHERE r.problem_key = ? AND r.id != ? AND n.status = 'done' AND n.is_bug = 0"
            " AND n.parent_id IS NOT NULL ORDER BY n.score DESC LIMIT ?",
            (problem_key, exclude_run, 4 * k),
        ).fetchall()
        seen: set[str] = set()
        out: list[tuple[Node, Run]] = []
        for r in rows:
            n = _node(r)
            if n.code_hash in seen:
                continue
            seen.add(n.code_hash or "")
            out.append((n, self.get_run(n.run_id)))
            if len(out) == k:
                break
        return out


def _node(row: sqlite3.Row) -> Node:
    d = dict(row)
    d["is_bug"] = bool(d["is_bug"])
    return Node(**d)
