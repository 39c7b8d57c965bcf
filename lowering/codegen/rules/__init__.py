"""The rule table: tile-IR op name -> function(lowering, op). One module per group of ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowering.codegen.lower import KernelLowering

Rule = Callable[["KernelLowering", Any], None]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register `fn` as the lowering of the ops `names`."""

    def deco(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:
                raise ValueError(f"two lowering rules for {n}")
            RULES[n] = fn
        return fn

    return deco


from lowering.codegen.rules import (  # noqa: E402,F401
    arith,
    casts,
    constants,
    control,
    dot,
    extern,
    indexed,
    memory,
    reduce,
    tensor,
)
