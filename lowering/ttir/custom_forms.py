"""Readers of the custom (pretty) op forms, one per syntax family named in the op registry.

The grammar keeps a custom op's body as a flat list of `Item`s; a reader walks it with a `Cursor`
and returns the op's operands, result types, attributes, regions and successors, as MLIR's own
custom parsers do. ``READERS[spec.syntax]`` is the reader of an op; the families of readers live in
`forms_scalar` and `forms_tensor`, whose import fills `READERS` (the builder imports them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lowering.ir.attributes import UNIT, IntAttr
from lowering.ir.core import Block, Region, Value
from lowering.ir.registry import ENUMS, OpSpec, registrar
from lowering.ir.types import (
    Type,
    i32,
)
from lowering.ttir.raw import Item, RawOp, RawRegion

__all__ = ["Parsed", "Cursor", "BuildContext", "READERS", "normalize_enum_attrs"]


class BuildContext(Protocol):
    """What a reader needs from the IR builder."""

    def lookup(self, name: str, item: Item | None = None) -> Value: ...

    def build_region(
        self, raw: RawRegion, arg_names: Sequence[str] | None = None, arg_types: Sequence[Type] | None = None
    ) -> Region: ...

    def block_ref(self, label: str) -> Block: ...

    def error(self, message: str, item: Item | None = None) -> Exception: ...


@dataclass
class Parsed:
    operands: list[Value] = field(default_factory=list)
    result_types: list[Type] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    successors: list[Block] = field(default_factory=list)


class Cursor:
    """A position in a custom op's item list."""

    def __init__(self, items: list[Item], ctx: BuildContext, raw: RawOp) -> None:
        self.items = items
        self.pos = 0
        self.ctx = ctx
        self.raw = raw

    # -- looking ------------------------------------------------------------------------------
    def peek(self, offset: int = 0) -> Item | None:
        i = self.pos + offset
        return self.items[i] if i < len(self.items) else None

    def at_end(self) -> bool:
        return self.pos >= len(self.items)

    def is_punct(self, p: str, offset: int = 0) -> bool:
        it = self.peek(offset)
        return it is not None and it.kind == "punct" and it.value == p

    def is_word(self, w: str | None = None, offset: int = 0) -> bool:
        it = self.peek(offset)
        return it is not None and it.kind == "word" and (w is None or it.value == w)

    def is_kind(self, kind: str, offset: int = 0) -> bool:
        it = self.peek(offset)
        return it is not None and it.kind == kind

    # -- consuming ----------------------------------------------------------------------------
    def fail(self, what: str) -> Exception:
        it = self.peek()
        found = "end of op" if it is None else f"{it.kind} {it.value!r}"
        return self.ctx.error(f"in '{self.raw.name}': expected {what}, found {found}", it)

    def next(self, kind: str, what: str) -> Item:
        it = self.peek()
        if it is None or it.kind != kind:
            raise self.fail(what)
        self.pos += 1
        return it

    def accept_punct(self, p: str) -> bool:
        if self.is_punct(p):
            self.pos += 1
            return True
        return False

    def expect_punct(self, p: str) -> None:
        if not self.accept_punct(p):
            raise self.fail(f"'{p}'")

    def accept_word(self, w: str) -> bool:
        if self.is_word(w):
            self.pos += 1
            return True
        return False

    def expect_word(self, choices: Sequence[str] | None = None) -> str:
        it = self.peek()
        if it is not None and it.kind == "type" and choices is not None and str(it.value) in choices:
            self.pos += 1  # a keyword that lexes as a type (tf32, bf16)
            return str(it.value)
        it = self.next("word", "a keyword" + (f" ({', '.join(choices)})" if choices else ""))
        if choices is not None and it.value not in choices:
            self.pos -= 1
            raise self.fail("one of " + ", ".join(choices))
        return str(it.value)

    def expect_value(self) -> Value:
        it = self.next("value", "an SSA value (%name)")
        return self.ctx.lookup(it.value, it)

    def value_list(self) -> list[Value]:
        """Zero or more comma-separated values."""
        out: list[Value] = []
        if not self.is_kind("value"):
            return out
        out.append(self.expect_value())
        while self.is_punct(",") and self.is_kind("value", 1):
            self.pos += 1
            out.append(self.expect_value())
        return out

    def typed_value_list(self) -> list[Value]:
        """``%a, %b : t, t`` (the types are read past, the values carry them); nothing when no value."""
        vals = self.value_list()
        if vals:
            self.expect_punct(":")
            self.type_list()
        return vals

    def expect_type(self) -> Type:
        return self.next("type", "a type").value  # type: ignore[no-any-return]

    def expect_short_type(self, wrap: Callable[[Type], Type]) -> Type:
        """A type, or its short form ``<inner>`` (Triton prints ``<tensor<..>>`` for a block pointer
        and ``<f32>`` for a pointer); `wrap` builds the full type from the inner one."""
        if self.accept_punct("<"):
            inner = self.expect_type()
            self.expect_punct(">")
            return wrap(inner)
        return self.expect_type()

    def type_list(self) -> list[Type]:
        out = [self.expect_type()]
        while self.is_punct(",") and self.is_kind("type", 1):
            self.pos += 1
            out.append(self.expect_type())
        return out

    def paren_type_list(self) -> list[Type]:
        """``(t, t, ...)`` or a single bare type."""
        if self.accept_punct("("):
            if self.accept_punct(")"):
                return []
            ts = self.type_list()
            self.expect_punct(")")
            return ts
        return [self.expect_type()]

    def accept_attr_dict(self, into: dict[str, Any]) -> bool:
        if self.is_kind("attr_dict"):
            into.update(self.items[self.pos].value)
            self.pos += 1
            return True
        return False

    def expect_region(
        self, arg_names: Sequence[str] | None = None, arg_types: Sequence[Type] | None = None
    ) -> Region:
        it = self.next("region", "a region { ... }")
        return self.ctx.build_region(it.value, arg_names, arg_types)

    def expect_int(self) -> int:
        return int(self.next("int", "an integer").value)

    def done(self) -> None:
        if not self.at_end():
            raise self.fail("end of op")


Reader = Callable[[Cursor, OpSpec], Parsed]
READERS: dict[str, Reader] = {}


_reader = registrar(READERS)


def normalize_enum_attrs(spec: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """Enum attributes given as integers (generic form, attr-dicts) → their keywords; defaults filled."""
    for name, a in spec.attrs.items():
        if name not in attrs and a.default is not None:
            attrs[name] = IntAttr(a.default, i32) if a.kind == "int" else a.default
        if a.kind == "enum" and a.enum and name in attrs:
            v = attrs[name]
            if isinstance(v, int) and not isinstance(v, bool):
                inverse = {code: kw for kw, code in ENUMS[a.enum].items()}
                if int(v) in inverse:
                    attrs[name] = inverse[int(v)]
        elif a.kind == "unit" and attrs.get(name) is True:
            attrs[name] = UNIT
    return attrs


def _trailing(cur: Cursor, p: Parsed) -> None:
    cur.accept_attr_dict(p.attrs)
    cur.expect_punct(":")

