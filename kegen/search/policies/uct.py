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
    ever mutating its own best kernel (D42).

    A node whose drafted alternative (a sibling starting point the drafters made as its child) is
    `draft_supersedes` times as fit is not widened (D60): the template drafts of new ops ran 1.4-7x
    faster than Inductor's root, and widening kept spending half the budget mutating the root."""

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
            widen = expandable and len(kids) < self.config.widening * math.sqrt(visits)
            lead = self._superseding_draft(node, kids)
            if lead is not None:  # the weaker start's own line is left: no widening, its children only if fit
                factor = self.config.draft_supersedes
                live = [k for k in live if k.operator == "draft" or k.fitness * factor >= lead.fitness]
            if not live or (widen and lead is None):
                return Selection(node.id)
            node = max(live, key=lambda k: (self.ucb(k, visits, norm, tree), -k.id))

    def _superseding_draft(self, node: Node, kids: list[Node]) -> Node | None:
        """The fittest drafted alternative among `node`'s children (operator `draft`: another drafter's
        starting point, such as kegen's template beside Inductor's root) where it is `draft_supersedes`
        times as fit as `node`, else None. Then `node` is not widened and its other children stay in
        the descent only where they are within that factor of it."""
        factor = self.config.draft_supersedes
        if factor <= 0 or not node.correct or node.fitness <= 0:
            return None
        drafts = [k for k in kids if k.operator == "draft" and k.correct]
        lead = max(drafts, key=lambda k: k.fitness, default=None)
        return lead if lead is not None and lead.fitness >= factor * node.fitness else None

    def ucb(self, child: Node, parent_visits: int, norm: float, tree: TreeView) -> float:
        """UCB1 of a child; unvisited children score infinity."""
        pending = sum(1 for k in tree.kids(child.id) if k.status == "pending")
        n = child.visits + pending
        if n == 0:
            return math.inf
        q = (child.value_sum / n) / norm
        return q + self.config.exploration * math.sqrt(math.log(max(parent_visits, 1)) / n)
