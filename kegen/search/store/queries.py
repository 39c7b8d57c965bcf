"""Reading the search graph: nodes by run, status and hash; tree queries (recursive CTEs); the best
nodes of this and of earlier runs (a `GraphStore` mixin)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from kegen.search.store.rows import NODE_COLS, Evaluation, Node, Run, node_from_row


class TreeQueries:
    """Read-only queries over the `nodes`, `evaluations` and `runs` tables of a `GraphStore`."""

    _db: sqlite3.Connection

    def get_run(self, run_id: str) -> Run:  # provided by GraphStore
        raise NotImplementedError

    def node(self, node_id: int) -> Node:
        row = self._db.execute(f"SELECT {NODE_COLS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise KeyError(f"node {node_id} does not exist")
        return node_from_row(row)

    def nodes(self, run_id: str, status: str | None = None) -> list[Node]:
        q = f"SELECT {NODE_COLS} FROM nodes WHERE run_id = ?"
        args: tuple[Any, ...] = (run_id,)
        if status is not None:
            q += " AND status = ?"
            args += (status,)
        return [node_from_row(r) for r in self._db.execute(q + " ORDER BY id", args)]

    def root(self, run_id: str) -> Node | None:
        row = self._db.execute(
            f"SELECT {NODE_COLS} FROM nodes WHERE run_id = ? AND parent_id IS NULL ORDER BY id LIMIT 1",
            (run_id,),
        ).fetchone()
        return node_from_row(row) if row else None

    def pending(self, run_id: str) -> list[Node]:
        """Nodes written but not evaluated (what a resumed search evaluates first)."""
        return self.nodes(run_id, status="pending")

    def children(self, node_id: int) -> list[Node]:
        return [
            node_from_row(r)
            for r in self._db.execute(
                f"SELECT {NODE_COLS} FROM nodes WHERE parent_id = ? ORDER BY id", (node_id,)
            )
        ]

    def siblings(self, node_id: int) -> list[Node]:
        """Other children of this node's parent."""
        return [
            node_from_row(r)
            for r in self._db.execute(
                f"SELECT {NODE_COLS} FROM nodes WHERE parent_id = (SELECT parent_id FROM nodes WHERE id = ?)"
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
        return [node_from_row(r) for r in rows]

    def subtree(self, node_id: int) -> list[Node]:
        """The node and all its descendants, by a recursive query."""
        rows = self._db.execute(
            "WITH RECURSIVE sub(id) AS (SELECT ?"
            " UNION ALL SELECT n.id FROM nodes n JOIN sub ON n.parent_id = sub.id)"
            f" SELECT {', '.join('n.' + c for c in Node.__dataclass_fields__)} FROM nodes n"
            " WHERE n.id IN (SELECT id FROM sub) ORDER BY n.id",
            (node_id,),
        ).fetchall()
        return [node_from_row(r) for r in rows]

    def best(self, run_id: str, k: int = 1) -> list[Node]:
        """The k correct nodes with the highest fitness (ties: the earliest)."""
        return [
            node_from_row(r)
            for r in self._db.execute(
                f"SELECT {NODE_COLS} FROM nodes WHERE run_id = ? AND status = 'done' AND is_bug = 0"
                " ORDER BY score DESC, id ASC LIMIT ?",
                (run_id, k),
            )
        ]

    def find_by_hash(self, run_id: str, h: str) -> Node | None:
        row = self._db.execute(
            f"SELECT {NODE_COLS} FROM nodes WHERE run_id = ? AND code_hash = ?"
            " AND status = 'done' ORDER BY id LIMIT 1",
            (run_id, h),
        ).fetchone()
        return node_from_row(row) if row else None

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
            n = node_from_row(r)
            if n.code_hash in seen:
                continue
            seen.add(n.code_hash or "")
            out.append((n, self.get_run(n.run_id)))
            if len(out) == k:
                break
        return out
