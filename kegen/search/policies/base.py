"""The policy interface and the tree snapshot policies read."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass, field

from kegen.search.config import PolicyConfig
from kegen.search.store import Node


@dataclass(frozen=True)
class Selection:
    """The parent to expand, and (evolutionary policy) the island the child joins."""

    parent_id: int
    island: int | None = None
    phase: str = "optimize"  # draft | optimize | debug


@dataclass
class TreeView:
    """An in-memory snapshot of one run's tree (pending nodes included: they count as in flight)."""

    nodes: dict[int, Node]
    root_id: int
    children: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    exhausted: frozenset[int] = frozenset()

    @classmethod
    def build(cls, nodes: list[Node], exhausted: set[int] | frozenset[int] = frozenset()) -> TreeView:
        """The tree of `nodes`; `exhausted` nodes (nothing new can be written from them) are not chosen."""
        roots = [n for n in nodes if n.parent_id is None]
        if not roots:
            raise ValueError("the run has no root node")
        view = cls(nodes={n.id: n for n in nodes}, root_id=roots[0].id, exhausted=frozenset(exhausted))
        for n in nodes:
            if n.parent_id is not None:
                view.children[n.parent_id].append(n.id)
        return view

    @property
    def root(self) -> Node:
        return self.nodes[self.root_id]

    def kids(self, node_id: int) -> list[Node]:
        return [self.nodes[i] for i in self.children.get(node_id, [])]

    def correct(self) -> list[Node]:
        """Correct nodes that can still be expanded."""
        return [n for n in self.nodes.values() if n.correct and n.id not in self.exhausted]

    def best(self) -> Node | None:
        ok = [n for n in self.nodes.values() if n.correct]
        return max(ok, key=lambda n: (n.fitness, -n.id)) if ok else None

    def max_fitness(self) -> float:
        b = self.best()
        return b.fitness if b and b.fitness > 0 else 1.0


class Policy(ABC):
    """Chooses the node to expand. The first `draft_children` steps expand the root (draft phase)."""

    name = "policy"

    def __init__(self, config: PolicyConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng

    def select(self, tree: TreeView) -> Selection:
        """The draft phase, then the policy's own choice; a buggy leaf is sometimes picked to debug."""
        drafting = len(tree.children.get(tree.root_id, [])) < self.config.draft_children
        if (drafting and tree.root_id not in tree.exhausted) or not tree.correct():
            return self.draft_selection(tree)
        if self.config.debug_probability > 0 and self.rng.random() < self.config.debug_probability:
            bugs = [
                n for n in tree.nodes.values() if n.evaluated and n.is_bug and not tree.children.get(n.id)
            ]
            if bugs:
                return Selection(self.rng.choice(bugs).id, phase="debug")
        return self.choose(tree)

    def draft_selection(self, tree: TreeView) -> Selection:
        return Selection(tree.root_id, phase="draft")

    @abstractmethod
    def choose(self, tree: TreeView) -> Selection:
        """The policy's choice after the draft phase."""

    def update(self, node: Node, tree: TreeView) -> None:  # noqa: B027 - optional hook
        """Called once a node is evaluated (the driver has already backed its value up the tree)."""
