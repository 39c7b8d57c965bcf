"""A mutation: a named, described source rewrite with the bottlenecks it is meant to relieve."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


class MutationError(ValueError):
    """A mutation does not apply to this source."""


@dataclass(frozen=True)
class Mutation:
    """`apply(source) -> source`; `family` groups mutations for learning which kinds pay off."""

    name: str
    family: str
    description: str
    apply: Callable[[str], str] = field(compare=False, repr=False)
    helps: tuple[str, ...] = ()  # bottlenecks it targets: memory, compute, latency
    prior: float = 1.0
