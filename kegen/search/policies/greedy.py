"""Greedy: expand the best correct node; with probability epsilon a random correct one."""

from __future__ import annotations

from kegen.search.policies.base import Policy, Selection, TreeView


class GreedyPolicy(Policy):
    """Exploit the best node so far (ties broken toward the node with fewer children)."""

    name = "greedy"

    def choose(self, tree: TreeView) -> Selection:
        ok = tree.correct()
        if self.rng.random() < self.config.epsilon:
            return Selection(self.rng.choice(ok).id)
        best = max(ok, key=lambda n: (round(n.fitness, 6), -len(tree.children.get(n.id, [])), -n.id))
        return Selection(best.id)
