"""Printing the tile IR as TTIR-style MLIR text that a person can read and `parse_ttir` reads back.

Ops print in their custom (pretty) form, as Triton prints them, when the registry names a printer
for their syntax; otherwise (``tt.reduce``, ``tt.scan``, ...) in the generic form. SSA names come
from the name hints kept by the parser (``%offs_2``), made unique. With ``locations=True`` every
op carries its location inline (``loc("k.py":12:5)``), so a round trip keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lowering.ir.attr_format import (  # re-exported: the printer's public helpers
    format_attr,
    format_attr_dict,
    format_float,
    quote,
    symbol_text,
)
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import Location
from lowering.ir.printer_forms import _WRITERS, _enum_as_int, _functional_types
from lowering.ir.registry import OP_SPECS

if TYPE_CHECKING:  # annotations only: Module.__str__ prints with this module
    from lowering.ir.module import Function, Module

__all__ = ["print_module", "print_function", "print_op", "format_attr", "format_float", "Printer"]


class Printer:
    """Prints one module/function; keeps the SSA name table."""

    def __init__(self, locations: bool = False, indent: str = "  ", generic: bool = False) -> None:
        self.locations = locations
        self.generic = generic
        self.indent_unit = indent
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.block_names: dict[int, str] = {}
        self.counter = 0
        self.lines: list[str] = []

    # -- names ---------------------------------------------------------------------------------
    def _fresh(self, hint: str | None) -> str:
        if hint is None or not re.match(r"^[A-Za-z_][A-Za-z0-9_$.\-]*$", hint):
            while str(self.counter) in self.used:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        else:
            name = hint
            k = 0
            while name in self.used:
                name = f"{hint}_{k}"
                k += 1
        self.used.add(name)
        return name

    def define(self, v: Value) -> str:
        name = self._fresh(v.name_hint)
        self.names[id(v)] = name
        return "%" + name

    def define_results(self, op: Operation) -> str:
        if not op.results:
            return ""
        if len(op.results) == 1:
            return self.define(op.results[0]) + " = "
        hints = [r.name_hint for r in op.results]
        if all(hints) and len(set(hints)) == len(hints):  # tt.split: %outLHS, %outRHS = ...
            return ", ".join(self.define(r) for r in op.results) + " = "
        base = self._fresh(op.results[0].name_hint)
        for i, r in enumerate(op.results):
            self.names[id(r)] = f"{base}#{i}"
        return f"%{base}:{len(op.results)} = "

    def ref(self, v: Value) -> str:
        name = self.names.get(id(v))
        if name is None:
            return f"%<undefined {v.type}>"
        return "%" + name

    def refs(self, vs: Sequence[Value]) -> str:
        return ", ".join(self.ref(v) for v in vs)

    def typed_refs(self, vs: Sequence[Value]) -> str:
        """``%a, %b : t, t``."""
        return f"{self.refs(vs)} : " + ", ".join(str(v.type) for v in vs)

    def block_name(self, b: Block) -> str:
        """``^bbN`` with N the block's index in its region (as MLIR numbers them)."""
        if id(b) not in self.block_names:
            r = b.parent
            index = r.blocks.index(b) if r is not None and b in r.blocks else len(self.block_names)
            self.block_names[id(b)] = f"^bb{index}"
        return self.block_names[id(b)]

    # -- structure -----------------------------------------------------------------------------
    def loc(self, loc: Location) -> str:
        return " " + loc.to_mlir() if self.locations else ""

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(self.indent_unit * depth + text)

    def print_module(self, m: Module) -> str:
        attrs = format_attr_dict(m.attributes)
        self.emit(0, "module " + (f"attributes {attrs} " if attrs else "") + "{")
        for f in m.functions:
            self.print_function(f, 1)
        self.emit(0, "}" + self.loc(m.location))
        return "\n".join(self.lines) + "\n"

    def print_function(self, f: Function, depth: int = 0) -> None:
        self.names = {}
        self.used = set()
        self.block_names = {}
        self.counter = 0
        args = []
        for i, a in enumerate(f.args):
            s = f"{self.define(a)}: {a.type}"
            attrs = format_attr_dict(f.arg_attrs[i]) if i < len(f.arg_attrs) else ""
            if attrs:
                s += " " + attrs
            if self.locations and i < len(f.arg_locations):
                s += self.loc(f.arg_locations[i])
            args.append(s)
        head = (
            "tt.func "
            + (f"{f.visibility} " if f.visibility else "")
            + symbol_text(f.name)
            + "("
            + ", ".join(args)
            + ")"
        )
        if f.result_types:
            rts = ", ".join(map(str, f.result_types))
            head += f" -> {rts}" if len(f.result_types) == 1 else f" -> ({rts})"
        attrs = format_attr_dict(f.attributes)
        if attrs:
            head += f" attributes {attrs}"
        if f.is_declaration and not f.body.entry.ops:
            self.emit(depth, head + self.loc(f.location))
            return
        self.emit(depth, head + " {")
        self.lines.extend(self.region_text(f.body, depth + 1, entry_args_printed=True))
        self.emit(depth, "}" + self.loc(f.location))

    def region_text(
        self, r: Region, depth: int, entry_args_printed: bool, elide_empty_yield: bool = False
    ) -> list[str]:
        """Prints a region's blocks into lines (without the braces)."""
        saved = self.lines
        self.lines = []
        for i, b in enumerate(r.blocks):
            if i > 0 or (not entry_args_printed and b.args):
                args = ", ".join(f"{self.define(a)}: {a.type}" for a in b.args)
                self.emit(depth - 1, f"{self.block_name(b)}" + (f"({args})" if b.args else "") + ":")
            for op in b.ops:
                if (
                    elide_empty_yield
                    and op.name == "scf.yield"
                    and not op.operands
                    and not op.attributes
                    and op is b.terminator
                ):
                    continue
                self.print_op(op, depth)
        out = self.lines
        self.lines = saved
        return out

    def print_op(self, op: Operation, depth: int) -> None:
        spec = OP_SPECS.get(op.name)
        writer = _WRITERS.get(spec.syntax) if spec is not None and not self.generic else None
        if writer is None:
            self._generic(op, depth)
            return
        writer(self, op, depth)

    # -- helpers for writers --------------------------------------------------------------------
    def simple(self, op: Operation, depth: int, body: str) -> None:
        """Emit ``results = name body loc`` on one line."""
        head = self.define_results(op)
        self.emit(depth, f"{head}{op.name}{(' ' + body) if body else ''}{self.loc(op.location)}")

    def with_regions(
        self, op: Operation, depth: int, head: str, parts: list[tuple[str, Region, bool]], tail: str = ""
    ) -> None:
        """Emit an op whose line opens regions: ``head {`` ... ``} part {`` ... ``}``."""
        first = True
        for prefix, region, args_printed in parts:
            lines = self.region_text(
                region, depth + 1, args_printed, elide_empty_yield=op.name != "scf.while"
            )
            opener = head if first else "} " + prefix
            self.emit(depth, opener + (" " if opener else "") + "{")
            self.lines.extend(lines)
            first = False
        self.emit(depth, "}" + (" " + tail if tail else "") + self.loc(op.location))

    def _generic(self, op: Operation, depth: int) -> None:
        spec = OP_SPECS.get(op.name)
        inherent = set(spec.attrs) if spec is not None else set()
        props: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for k, v in op.attributes.items():
            if k in inherent or k == "operandSegmentSizes":
                props[k] = (
                    _enum_as_int(spec.attrs[k].enum, v)
                    if spec and k in spec.attrs and spec.attrs[k].kind == "enum"
                    else v
                )
            else:
                rest[k] = v
        text = self.define_results(op) + quote(op.name) + "(" + self.refs(op.operands) + ")"
        if op.successors:
            text += "[" + ", ".join(self.block_name(b) for b in op.successors) + "]"
        if props:
            text += " <" + format_attr_dict(props) + ">"
        tail = ""
        if rest:
            tail += " " + format_attr_dict(rest)
        tail += " : " + _functional_types(op)
        if not op.regions:
            self.emit(depth, text + tail + self.loc(op.location))
            return
        self.emit(depth, text + " ({")
        for i, r in enumerate(op.regions):
            if i > 0:
                self.emit(depth, "}, {")
            self.lines.extend(self.region_text(r, depth + 1, entry_args_printed=False))
        self.emit(depth, "})" + tail + self.loc(op.location))


def print_module(m: Module, locations: bool = False, generic: bool = False) -> str:
    """The module as TTIR-style text; ``locations=True`` keeps each op's location inline;
    ``generic=True`` prints every op in MLIR's generic form (``"tt.load"(%p) <{...}> : (...) -> ...``)."""
    return Printer(locations, generic=generic).print_module(m)


def print_function(f: Function, locations: bool = False, generic: bool = False) -> str:
    p = Printer(locations, generic=generic)
    p.print_function(f)
    return "\n".join(p.lines) + "\n"


def print_op(op: Operation, locations: bool = False) -> str:
    """One op (and its regions) as text, with the names it would get in a fresh printer."""
    p = Printer(locations)
    for v in op.operands:
        if id(v) not in p.names:
            p.define(v)
    p.print_op(op, 0)
    return "\n".join(p.lines)
