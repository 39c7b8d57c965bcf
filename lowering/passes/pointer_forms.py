"""The vocabulary of pointer analysis (`lowering.passes.pointer_analysis`): scalar expressions over
kernel scalars (`SExpr` and its folding algebra), the affine and mask forms the analysis derives, and
its results (`BlockAccess`, `RowAccess`, `CarriedPointer`, `PointerInfo`) that the code generator reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lowering.ir.core import BlockArgument, Operation, Value

# Scalar expressions over kernel scalars: ("c", int) | ("v", Value) | (op, a, b) with op in add/sub/mul.
SExpr = tuple[Any, ...]
ZERO: SExpr = ("c", 0)
ONE: SExpr = ("c", 1)


def s_const(e: SExpr) -> int | None:
    return e[1] if e[0] == "c" else None


def s_add(a: SExpr, b: SExpr) -> SExpr:
    ca, cb = s_const(a), s_const(b)
    if ca is not None and cb is not None:
        return ("c", ca + cb)
    if ca == 0:
        return b
    if cb == 0:
        return a
    return ("add", a, b)


def s_neg(a: SExpr) -> SExpr:
    if a[0] == "sub":
        return s_sub(a[2], a[1])
    return s_mul(("c", -1), a)


def s_sub(a: SExpr, b: SExpr) -> SExpr:
    cb = s_const(b)
    if cb == 0:
        return a
    if a == b:
        return ZERO
    if a[0] == "add" and a[2] == b:
        return a[1]
    if a[0] == "add" and a[1] == b:
        return a[2]
    ca = s_const(a)
    if ca is not None and cb is not None:
        return ("c", ca - cb)
    return ("sub", a, b)


def s_mul(a: SExpr, b: SExpr) -> SExpr:
    ca, cb = s_const(a), s_const(b)
    if ca is not None and cb is not None:
        return ("c", ca * cb)
    if ca == 0 or cb == 0:
        return ZERO
    if ca == 1:
        return b
    if cb == 1:
        return a
    return ("mul", a, b)


def s_str(e: SExpr) -> str:
    """Readable form for golden tests: `%n`, `4`, `(%pid * 64)`."""
    if e[0] == "c":
        return str(e[1])
    if e[0] == "v":
        return f"%{e[1].name_hint or '?'}"
    if e[0] == "carry":
        return f"carry(%{e[1].name_hint or '?'})"
    sym = {"add": "+", "sub": "-", "mul": "*"}[e[0]]
    return f"({s_str(e[1])} {sym} {s_str(e[2])})"


@dataclass(frozen=True)
class Affine:
    """`base + offset + sum_k coefs[k] * index_k` (element units of the pointee for pointers), plus
    `rows[index]` when given: an integer tensor whose last dim is 1, broadcast to the shape."""

    base: Value | None
    offset: SExpr
    coefs: tuple[SExpr, ...]
    rows: Value | None = None

    @property
    def uniform(self) -> bool:
        return self.rows is None and all(c == ZERO for c in self.coefs)


@dataclass(frozen=True)
class MaskInfo:
    """Conjunction of `index_k < bound` (per dim, min over the list) and uniform conditions.

    A condition is ("lt0", e): e < 0, or ("v", value): an i1 scalar. `rows`, when given, is an i1
    tensor whose last dim is 1 (a per-row condition), broadcast to the shape and ANDed in.
    """

    bounds: tuple[tuple[SExpr, ...], ...]
    conds: tuple[SExpr, ...] = ()
    rows: Value | None = None


@dataclass
class BlockAccess:
    """A load/store the DMA does as one strided block copy."""

    op: Operation
    base: Value
    offset: SExpr
    strides: tuple[SExpr, ...]
    mask: MaskInfo | None
    mask_tensor: bool = False  # the mask is not a box: the DMA reads it from the local store

    def describe(self) -> str:
        s = f"block base=%{self.base.name_hint or '?'} offset={s_str(self.offset)} "
        s += "strides=[" + ", ".join(s_str(x) for x in self.strides) + "]"
        if self.mask_tensor:
            s += " mask=tensor"
        if self.mask is not None:
            bounds = [
                "min(" + ", ".join(s_str(b) for b in bs) + ")" if bs else "-" for bs in self.mask.bounds
            ]
            s += " valid=[" + ", ".join(bounds) + "]"
            if self.mask.conds:
                s += " if " + " and ".join(_cond_str(c) for c in self.mask.conds)
        return s


@dataclass
class RowAccess:
    """A load the DMA does as one row gather: element (i, j) at `base + offset + rows[i] + j`
    (element units; `rows` an integer tensor whose last dim is 1). The mask is `mask` (its box
    and its row tensor) or, with `mask_tensor`, the load's mask tensor itself."""

    op: Operation
    base: Value
    offset: SExpr
    rows: Value
    mask: MaskInfo | None
    mask_tensor: bool = False

    def values(self) -> list[Value]:
        """The tensors the row gather reads besides the load's operands."""
        extra = [self.rows]
        if self.mask is not None and self.mask.rows is not None:
            extra.append(self.mask.rows)
        return extra

    def describe(self, name: Callable[[Value], str] | None = None) -> str:
        """One line for listings; `name` spells values (default: `%name_hint`)."""
        spell = name or (lambda v: f"%{v.name_hint or '?'}")
        s = f"rows base={spell(self.base)} offset={s_str(self.offset)} rows={spell(self.rows)}"
        if self.mask_tensor:
            s += " mask=tensor"
        if self.mask is not None:
            bounds = [
                "min(" + ", ".join(s_str(b) for b in bs) + ")" if bs else "-" for bs in self.mask.bounds
            ]
            s += " valid=[" + ", ".join(bounds) + "]"
            if self.mask.rows is not None:
                s += f" row_mask={spell(self.mask.rows)}"
            if self.mask.conds:
                s += " if " + " and ".join(_cond_str(c) for c in self.mask.conds)
        return s


def _cond_str(c: SExpr) -> str:
    return f"{s_str(c[1])} < 0" if c[0] == "lt0" else s_str(c)


@dataclass
class CarriedPointer:
    """A pointer tensor carried by an scf.for that only moves by a uniform step per iteration
    (`ptrs += BLOCK * stride`): it stays symbolic; the core keeps the step sum in a register."""

    index: int  # iter_arg position
    arg: BlockArgument  # the body's block argument
    result: Value  # the loop's result
    delta: SExpr  # added at each scf.yield (element units)


@dataclass
class PointerInfo:
    """Result of the pass: block accesses by op, and the tensors that need a local-store buffer."""

    accesses: dict[int, BlockAccess] = field(default_factory=dict)
    rows: dict[int, RowAccess] = field(default_factory=dict)  # row gathers by id(load)
    row_values: dict[int, int] = field(default_factory=dict)  # id(tensor) -> row gathers reading it
    materialized: set[int] = field(default_factory=set)  # ids of tensor values needing a buffer
    carried: dict[int, dict[int, CarriedPointer]] = field(default_factory=dict)  # id(scf.for) -> index -> ...

    def access(self, op: Operation) -> BlockAccess | None:
        return self.accesses.get(id(op))

    def row_access(self, op: Operation) -> RowAccess | None:
        return self.rows.get(id(op))

    def needs_buffer(self, v: Value) -> bool:
        return id(v) in self.materialized
