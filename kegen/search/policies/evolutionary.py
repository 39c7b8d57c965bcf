"""Evolutionary islands: separate populations, tournament selection, periodic migration."""

from __future__ import annotations

from kegen.search.policies.base import Policy, Selection, TreeView
from kegen.search.store import Node


class IslandPolicy(Policy):
    """Islands take turns; each picks a parent by tournament among its correct members. Every
    `migration_every` selections an island breeds from the best member of its neighbour instead."""

    name = "evolutionary"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.turn = 0

    def draft_selection(self, tree: TreeView) -> Selection:
        island = len(tree.children.get(tree.root_id, [])) % max(self.config.islands, 1)
        return Selection(tree.root_id, island=island, phase="draft")

    def choose(self, tree: TreeView) -> Selection:
        k = max(self.config.islands, 1)
        island = self.turn % k
        self.turn += 1
        members = self.members(tree, island)
        if self.config.migration_every and self.turn % self.config.migration_every == 0:
            donors = self.members(tree, (island - 1) % k)
            if donors:
                best = max(donors, key=lambda n: (n.fitness, -n.id))
                return Selection(best.id, island=island)
        if not members:
            return Selection(tree.root_id, island=island)
        contenders = self.rng.sample(members, min(self.config.tournament, len(members)))
        return Selection(max(contenders, key=lambda n: (n.fitness, -n.id)).id, island=island)

    @staticmethod
    def members(tree: TreeView, island: int) -> list[Node]:
        return [n for n in tree.correct() if n.island == island and n.parent_id is not None]
