"""Selection policies: which node the next child is written from. Pluggable by name."""

from __future__ import annotations

import random

from kegen.search.config import PolicyConfig
from kegen.search.policies.base import Policy, Selection, TreeView
from kegen.search.policies.evolutionary import IslandPolicy
from kegen.search.policies.greedy import GreedyPolicy
from kegen.search.policies.uct import UctPolicy

POLICY_CLASSES: dict[str, type[Policy]] = {
    "greedy": GreedyPolicy,
    "uct": UctPolicy,
    "evolutionary": IslandPolicy,
}


def make_policy(config: PolicyConfig, rng: random.Random | None = None) -> Policy:
    """The policy named by `config.name`."""
    try:
        cls = POLICY_CLASSES[config.name]
    except KeyError:
        raise ValueError(
            f"unknown policy {config.name!r}; choose one of {', '.join(POLICY_CLASSES)}"
        ) from None
    return cls(config, rng or random.Random(0))


__all__ = ["GreedyPolicy", "IslandPolicy", "Policy", "Selection", "TreeView", "UctPolicy", "make_policy"]
