"""The rules that lower tile-IR ops, one module per group of ops; importing this package fills the
rule table (`RULES`, op name -> function(lowering, op)) that `KernelLowering` is handed."""

from __future__ import annotations

from lowering.codegen.rules import (  # noqa: F401 - each module files its rules in RULES
    arith,
    atomics,
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
from lowering.codegen.rules.table import RULES, Rule, rule

__all__ = ["RULES", "Rule", "rule"]
