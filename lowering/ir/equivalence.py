"""Structural comparison of two modules (what "the round trip gives the same module" means).

Two modules are equivalent when their functions, ops, types, attributes, regions and SSA def-use
structure match one to one (value *names* may differ); with ``locations=True`` op locations must
match too. `module_difference` returns the first difference as a sentence, or None.
"""

from __future__ import annotations

from lowering.ir.attributes import attr_equal
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.module import Function, Module

__all__ = ["module_difference", "modules_equivalent"]


class _Mismatch(Exception):
    pass


class _Comparer:
    def __init__(self, locations: bool) -> None:
        self.locations = locations
        self.values: dict[int, int] = {}  # id(value in a) -> id(value in b)
        self.blocks: dict[int, int] = {}

    def bind(self, a: Value, b: Value, where: str) -> None:
        if a.type != b.type:
            raise _Mismatch(f"{where}: type {a.type} vs {b.type}")
        self.values[id(a)] = id(b)

    def function(self, a: Function, b: Function) -> None:
        w = f"@{a.name}"
        for attr in ("name", "visibility", "result_types"):
            if getattr(a, attr) != getattr(b, attr):
                raise _Mismatch(f"{w}: {attr} {getattr(a, attr)!r} vs {getattr(b, attr)!r}")
        if not attr_equal(a.attributes, b.attributes):
            raise _Mismatch(f"{w}: attributes {a.attributes} vs {b.attributes}")
        if len(a.args) != len(b.args):
            raise _Mismatch(f"{w}: {len(a.args)} vs {len(b.args)} arguments")
        for i, (x, y) in enumerate(zip(a.arg_attrs, b.arg_attrs, strict=True)):
            if not attr_equal(x, y):
                raise _Mismatch(f"{w}: argument #{i} attributes {x} vs {y}")
        if self.locations and a.location != b.location:
            raise _Mismatch(f"{w}: location {a.location} vs {b.location}")
        self.region(a.body, b.body, w)

    def region(self, a: Region, b: Region, where: str) -> None:
        if len(a.blocks) != len(b.blocks):
            raise _Mismatch(f"{where}: {len(a.blocks)} vs {len(b.blocks)} blocks")
        for x, y in zip(a.blocks, b.blocks, strict=True):
            self.blocks[id(x)] = id(y)
            if len(x.args) != len(y.args):
                raise _Mismatch(f"{where}: block with {len(x.args)} vs {len(y.args)} arguments")
            for i, (p, q) in enumerate(zip(x.args, y.args, strict=True)):
                self.bind(p, q, f"{where}: block argument #{i}")
        for x, y in zip(a.blocks, b.blocks, strict=True):
            self.block(x, y, where)

    def block(self, a: Block, b: Block, where: str) -> None:
        if len(a.ops) != len(b.ops):
            names_a = [o.name for o in a.ops]
            names_b = [o.name for o in b.ops]
            raise _Mismatch(f"{where}: block has {len(a.ops)} vs {len(b.ops)} ops ({names_a} vs {names_b})")
        for i, (x, y) in enumerate(zip(a.ops, b.ops, strict=True)):
            self.op(x, y, f"{where}, op #{i} '{x.name}'")

    def op(self, a: Operation, b: Operation, where: str) -> None:
        if a.name != b.name:
            raise _Mismatch(f"{where}: op name {a.name} vs {b.name}")
        if len(a.operands) != len(b.operands):
            raise _Mismatch(f"{where}: {len(a.operands)} vs {len(b.operands)} operands")
        for i, (x, y) in enumerate(zip(a.operands, b.operands, strict=True)):
            if self.values.get(id(x)) != id(y):
                raise _Mismatch(f"{where}: operand #{i} refers to a different value")
        if a.attributes.keys() != b.attributes.keys():
            raise _Mismatch(f"{where}: attribute names {sorted(a.attributes)} vs {sorted(b.attributes)}")
        for k in a.attributes:
            if not attr_equal(a.attributes[k], b.attributes[k]):
                raise _Mismatch(f"{where}: attribute {k} = {a.attributes[k]!r} vs {b.attributes[k]!r}")
        if self.locations and a.location != b.location:
            raise _Mismatch(f"{where}: location {a.location} vs {b.location}")
        if len(a.results) != len(b.results):
            raise _Mismatch(f"{where}: {len(a.results)} vs {len(b.results)} results")
        if len(a.regions) != len(b.regions):
            raise _Mismatch(f"{where}: {len(a.regions)} vs {len(b.regions)} regions")
        for n, (ra, rb) in enumerate(zip(a.regions, b.regions, strict=True)):
            self.region(ra, rb, f"{where} region #{n}")
        for i, (va, vb) in enumerate(zip(a.results, b.results, strict=True)):
            self.bind(va, vb, f"{where}: result #{i}")
        if [self.blocks.get(id(s)) for s in a.successors] != [id(s) for s in b.successors]:
            raise _Mismatch(f"{where}: successors differ")


def module_difference(a: Module, b: Module, locations: bool = False) -> str | None:
    """The first structural difference between `a` and `b`, or None when they are equivalent."""
    if not attr_equal(a.attributes, b.attributes):
        return f"module attributes {a.attributes} vs {b.attributes}"
    if [f.name for f in a.functions] != [f.name for f in b.functions]:
        return f"functions {[f.name for f in a.functions]} vs {[f.name for f in b.functions]}"
    cmp = _Comparer(locations)
    try:
        for x, y in zip(a.functions, b.functions, strict=True):
            cmp.values = {}
            cmp.function(x, y)
    except _Mismatch as exc:
        return str(exc)
    return None


def modules_equivalent(a: Module, b: Module, locations: bool = False) -> bool:
    return module_difference(a, b, locations) is None
