"""Inline `tt.call`s of module functions (Triton's `noinline` helpers) into the kernel, so the
rest of the pipeline sees one function and one local-store allocation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lowering.errors import UnsupportedError
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.module import Function, Module
from lowering.passes.manager import Pass, PassContext

MAX_DEPTH = 16


def _clone_region(region: Region, vmap: dict[int, Value]) -> Region:
    new = Region()
    for block in region.blocks:
        nb = Block([a.type for a in block.args], [a.name_hint for a in block.args])
        for old, arg in zip(block.args, nb.args, strict=True):
            vmap[id(old)] = arg
        new.add_block(nb)
    for block, nb in zip(region.blocks, new.blocks, strict=True):
        for op in block.ops:
            nb.append(clone_op(op, vmap))
    return new


def clone_op(op: Operation, vmap: dict[int, Value]) -> Operation:
    """A copy of `op` (regions included) whose operands are remapped through `vmap`."""
    regions = [_clone_region(r, vmap) for r in op.regions]
    new = Operation(
        op.name,
        [vmap.get(id(v), v) for v in op.operands],
        [r.type for r in op.results],
        dict(op.attributes),
        regions,
        op.location,
        [r.name_hint for r in op.results],
    )
    for old, res in zip(op.results, new.results, strict=True):
        vmap[id(old)] = res
    return new


@dataclass(frozen=True)
class InlineCalls(Pass):
    """Pass: replace every `tt.call` in the kernel by the callee's body (result: how many)."""

    name: ClassVar[str] = "inline-calls"

    def apply(self, module: Module, ctx: PassContext) -> None:
        ctx.results[self.name] = inline_calls(module, ctx.kernel)


def inline_calls(module: Module, fn: Function) -> int:
    """Inline calls in `fn` until none is left; returns how many were inlined."""
    count = 0
    for _ in range(MAX_DEPTH):
        calls = [op for op in fn.walk() if op.name == "tt.call"]
        if not calls:
            return count
        for call in calls:
            _inline(module, call)
            count += 1
    raise UnsupportedError("tt.call nesting is too deep (recursive noinline functions?)", op=calls[0])


def _inline(module: Module, call: Operation) -> None:
    callee_ref = call.attr("callee")
    name = getattr(callee_ref, "name", str(callee_ref))
    try:
        callee = module.get_function(name)
    except KeyError:
        raise UnsupportedError(f"tt.call of unknown function @{name}", op=call) from None
    if len(callee.body.blocks) != 1:
        raise UnsupportedError(
            f"calls of @{name}: a noinline function with early returns",
            op=call,
            hint="write the helper without early returns",
        )
    block = call.parent
    assert block is not None
    vmap: dict[int, Value] = {id(a): v for a, v in zip(callee.args, call.operands, strict=True)}
    returned: list[Value] = []
    for op in callee.entry.ops:
        if op.name == "tt.return":
            returned = [vmap.get(id(v), v) for v in op.operands]
            continue
        block.insert_before(call, clone_op(op, vmap))
    for res, val in zip(call.results, returned, strict=True):
        res.replace_all_uses_with(val)
    call.erase()
