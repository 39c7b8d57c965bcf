"""Liveness of tile-IR values: after which op (in the defining block) each value is dead.

A use nested in a region (a loop body) keeps the value alive until the op that owns the region
ends, so a tensor defined before a loop survives every iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from lowering.ir.core import Block, Operation, Value
from lowering.ir.module import Function, Module
from lowering.passes.manager import Pass, PassContext


def _ancestor_in(op: Operation, block: Block) -> Operation | None:
    """`op` or the op enclosing it that sits directly in `block` (None when outside it)."""
    cur: Operation | None = op
    while cur is not None and cur.parent is not block:
        parent = cur.parent_op if isinstance(cur, Operation) else None
        cur = parent if isinstance(parent, Operation) else None
    return cur


@dataclass
class Liveness:
    """`dies_after[id(op)]`: values whose last use is `op` (or which are unused results of it)."""

    dies_after: dict[int, list[Value]] = field(default_factory=dict)

    def values_dying_after(self, op: Operation) -> list[Value]:
        return self.dies_after.get(id(op), [])


def _defining_block_and_op(v: Value) -> tuple[Block | None, Operation | None]:
    owner = v.owner
    if isinstance(owner, Block):
        return owner, None
    return owner.parent, owner


@dataclass(frozen=True)
class LivenessAnalysis(Pass):
    """Pass (analysis): `Liveness` of every value of the kernel."""

    name: ClassVar[str] = "liveness"
    requires: ClassVar[tuple[str, ...]] = ("inline-calls",)
    analysis: ClassVar[bool] = True

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = liveness(ctx.kernel)


def liveness(fn: Function) -> Liveness:
    """When each value of `fn` dies."""
    result = Liveness()
    values: list[Value] = list(fn.args)
    for op in fn.walk():
        values.extend(op.results)
        for region in op.regions:
            for blk in region.blocks:
                values.extend(blk.args)
    indices: dict[int, dict[int, int]] = {}
    for v in values:
        block, def_op = _defining_block_and_op(v)
        if block is None:
            continue
        last: Operation | None = None
        last_idx = -1
        index = indices.get(id(block))
        if index is None:
            index = {id(o): i for i, o in enumerate(block.ops)}
            indices[id(block)] = index
        escapes = False
        for use in v.uses:
            anc = _ancestor_in(use.op, block)
            if anc is None:
                escapes = True
                continue
            i = index[id(anc)]
            if i > last_idx:
                last, last_idx = anc, i
        if escapes:
            continue  # used in another block of the function (cf branches): kept alive
        if last is None:
            last = def_op if def_op is not None else (block.ops[0] if block.ops else None)
        if last is not None:
            result.dies_after.setdefault(id(last), []).append(v)
    return result
