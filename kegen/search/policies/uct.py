"""UCT: UCB1 applied down the tree, with progressive widening; values backed up to the root."""

from __future__ import annotations

import math

from kegen.search.policies.base import Policy, Selection, TreeView
from kegen.search.store import Node


class UctPolicy(Policy):
    """Descend from the root by UCB1 = Q/N + c*sqrt(ln N_parent / N), Q normalised by the best
    fitness found; stop and expand a node while it has fewer than `widening * sqrt(N)` children.
    Pending children count as visited (a virtual loss), so parallel selections spread out.

    With `expand_best`, the best correct node is chosen first while it has no children (pending
    ones included): UCB's means dilute a new best found under a weak sibling branch, and progressive
    widening keeps adding siblings above it, so without this a budget-20 search could end without
    ever mutating its own best kernel (D42)."""

    name = "uct"

    def choose(self, tree: TreeView) -> Selection:
        best = tree.best() if self.config.expand_best else None
        if best is not None and best.id not in tree.exhausted and not tree.children.get(best.id):
            return Selection(best.id)
        node = tree.root
        norm = tree.max_fitness()
        while True:
            kids = tree.kids(node.id)
            live = [k for k in kids if k.correct and (k.id not in tree.exhausted or tree.children.get(k.id))]
            visits = max(node.visits, 1)
            expandable = node.id not in tree.exhausted
            if not live or (expandable and len(kids) < self.config.widening * math.sqrt(visits)):
                return Selection(node.id)
            node = max(live, key=lambda k: (self.ucb(k, visits, norm, tree), -k.id))

    def ucb(self, child: Node, parent_visits: int, norm: float, tree: TreeView) -> float:
        """UCB1 of a child; unvisited children score infinity."""
        pending = sum(1 for k in tree.kids(child.id) if k.status == "pending")
        n = child.visits + pending
        if n == 0:
            return math.inf
        q = (child.value_sum / n) / norm
        return q + self.config.exploration * math.sqrt(math.log(max(parent_visits, 1)) / n)
