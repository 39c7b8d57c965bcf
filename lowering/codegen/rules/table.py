"""The rule table: tile-IR op name -> function(lowering, op). The rule modules of this package file
their functions here with `@rule("op.name", ...)`; importing `lowering.codegen.rules` fills it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rule = Callable[[Any, Any], None]  # (the KernelLowering, the op) -> None
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
