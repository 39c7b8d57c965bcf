"""The search graph's tables and the rows read from them: runs, nodes, evaluations."""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any

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


NODE_COLS = ", ".join(Node.__dataclass_fields__)


def node_from_row(row: sqlite3.Row) -> Node:
    """A `nodes` row (all NODE_COLS) as a Node."""
    d = dict(row)
    d["is_bug"] = bool(d["is_bug"])
    return Node(**d)
