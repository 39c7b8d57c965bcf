"""Printing the tile IR as TTIR-style MLIR text that a person can read and `parse_ttir` reads back.

Ops print in their custom (pretty) form, as Triton prints them, when the registry names a printer
for their syntax; otherwise (``tt.reduce``, ``tt.scan``, ...) in the generic form. SSA names come
from the name hints kept by the parser (``%offs_2``), made unique. With ``locations=True`` every
op carries its location inline (``loc("k.py":12:5)``), so a round trip keeps them.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lowering.ir.attributes import (
    DenseArray,
    DenseAttr,
    FloatAttr,
    IntAttr,
    OpaqueAttr,
    SymbolRef,
    UnitAttr,
)
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import Location
from lowering.ir.module import Function, Module
from lowering.ir.registry import ENUMS, OP_SPECS, named_operands, registrar
from lowering.ir.types import FloatType, IntType, Type, f32, i32

__all__ = ["print_module", "print_function", "print_op", "format_attr", "format_float", "Printer"]

_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$\-]*(\([0-9][0-9, ]*\)[A-Za-z0-9_.$\-]*)*$")
_DOTTED_KEY = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+$")
_ENUM_INT_TYPE = {"cmpi": IntType(64), "cmpf": IntType(64)}


def quote(s: str) -> str:
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\0A")
        elif ch == "\t":
            out.append("\\09")
        elif ord(ch) < 32:
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def format_float(x: float, t: Type = f32) -> str:
    """A float literal that reads back bit-exactly (non-finite values as the type's hex bits)."""
    x = float(x)
    if math.isfinite(x):
        s = repr(x)
        if "e" in s and "." not in s:
            s = s.replace("e", ".0e")
        if "." not in s and "e" not in s:
            s += ".0"
        return s
    width = t.bitwidth if isinstance(t, FloatType) else 64
    if width == 32:
        return f"0x{struct.unpack('<I', struct.pack('<f', x))[0]:08X}"
    if width == 64:
        return f"0x{struct.unpack('<Q', struct.pack('<d', x))[0]:016X}"
    from lowering.ir.attributes import numpy_dtype

    dt = numpy_dtype(t)
    bits = np.array([x]).astype(dt).view({1: np.uint8, 2: np.uint16}[dt.itemsize])[0]
    return f"0x{int(bits):0{dt.itemsize * 2}X}"


def _dense_elem(v: Any, t: Type) -> str:
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(t, FloatType):
        return format_float(float(v), t)
    return str(int(v))


def _dense_body(d: DenseAttr) -> str:
    elem = d.type.element
    if d.is_splat and d.value.size > 0:
        return _dense_elem(d.value.reshape(-1)[0], elem)

    def rec(a: np.ndarray) -> str:
        if a.ndim == 1:
            return "[" + ", ".join(_dense_elem(x, elem) for x in a) + "]"
        return "[" + ", ".join(rec(x) for x in a) + "]"

    return rec(d.value)


def format_attr(v: Any) -> str:
    """The MLIR spelling of an attribute value (see `lowering.ir.attributes`)."""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, IntAttr):
        if isinstance(v.type, IntType) and v.type.width == 1:
            return "true" if int(v) else "false"
        return f"{int(v)} : {v.type}"
    if isinstance(v, int):
        return f"{v} : i32"
    if isinstance(v, FloatAttr):
        return f"{format_float(v, v.type)} : {v.type}"
    if isinstance(v, float):
        return f"{format_float(v)} : f32"
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, DenseArray):
        if not v:
            return f"array<{v.element_type}>"
        et = v.element_type
        elems = ", ".join(
            ("true" if x else "false")
            if isinstance(et, IntType) and et.width == 1
            else (format_float(x, et) if isinstance(et, FloatType) else str(int(x)))
            for x in v
        )
        return f"array<{et}: {elems}>"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, dict):
        return format_attr_dict(v, braces=True)
    if isinstance(v, DenseAttr):
        return f"dense<{_dense_body(v)}> : {v.type}"
    if isinstance(v, Type):
        return str(v)
    if isinstance(v, SymbolRef):
        return symbol_text(v.name)
    if isinstance(v, UnitAttr):
        return "unit"
    if isinstance(v, OpaqueAttr):
        return v.text
    if isinstance(v, Location):
        return v.to_mlir()
    raise TypeError(f"cannot print attribute value {v!r}")


def symbol_text(name: str) -> str:
    """``@name``, quoted when the name has characters the TTIR grammar does not allow bare."""
    return f"@{name}" if _SYMBOL.match(name) else f"@{quote(name)}"


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) or _DOTTED_KEY.match(k) else quote(k)


def format_attr_dict(attrs: dict[str, Any], braces: bool = True, skip: Sequence[str] = ()) -> str:
    items = []
    for k in sorted(attrs):
        if k in skip:
            continue
        v = attrs[k]
        items.append(_key(k) if isinstance(v, UnitAttr) else f"{_key(k)} = {format_attr(v)}")
    if not items:
        return ""
    return "{" + ", ".join(items) + "}"


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


def _enum_as_int(enum: str | None, v: Any) -> Any:
    if enum and isinstance(v, str) and v in ENUMS[enum]:
        return IntAttr(ENUMS[enum][v], _ENUM_INT_TYPE.get(enum, i32))
    return v


Writer = Callable[[Printer, Operation, int], None]
_WRITERS: dict[str, Writer] = {}


_writer = registrar(_WRITERS)


def _ad(op: Operation, skip: Sequence[str] = ()) -> str:
    """`` {attr-dict}`` of the attributes not printed elsewhere ('' when none)."""
    d = format_attr_dict(op.attributes, skip=skip)
    return f" {d}" if d else ""


def _mods(op: Operation) -> str:
    return "".join(f" {k}<{op.attributes[k]}>" for k in ("fastmath", "overflow") if k in op.attributes)


@_writer("constant")
def _w_constant(p: Printer, op: Operation, depth: int) -> None:
    v = op.attributes["value"]
    if isinstance(v, DenseAttr):
        body = f"dense<{_dense_body(v)}> : {v.type}"
    elif isinstance(v, bool):
        body = "true" if v else "false"
    else:
        t = op.result.type
        body = f"{format_float(v, t)} : {t}" if isinstance(t, FloatType) else f"{int(v)} : {t}"
    p.simple(op, depth, body + _ad(op, ["value"]))


@_writer("same_type")
def _w_same_type(p: Printer, op: Operation, depth: int) -> None:
    p.simple(
        op, depth, f"{p.refs(op.operands)}{_mods(op)}{_ad(op, ['fastmath', 'overflow'])} : {op.result.type}"
    )


@_writer("cmp")
def _w_cmp(p: Printer, op: Operation, depth: int) -> None:
    p.simple(
        op,
        depth,
        f"{op.attributes['predicate']}, {p.refs(op.operands)}{_mods(op)}"
        f"{_ad(op, ['predicate', 'fastmath'])} : {op.operands[0].type}",
    )


@_writer("select")
def _w_select(p: Printer, op: Operation, depth: int) -> None:
    ct = op.operands[0].type
    types = f"{ct}, {op.result.type}" if ct.shape else f"{op.result.type}"
    p.simple(op, depth, f"{p.refs(op.operands)}{_ad(op)} : {types}")


@_writer("cast_to")
def _w_cast_to(p: Printer, op: Operation, depth: int) -> None:
    p.simple(
        op,
        depth,
        f"{p.ref(op.operands[0])}{_mods(op)}{_ad(op, ['fastmath'])} : "
        f"{op.operands[0].type} to {op.result.type}",
    )


@_writer("arrow_cast")
def _w_arrow_cast(p: Printer, op: Operation, depth: int) -> None:
    body = p.refs(op.operands)
    skip: list[str] = []
    if "rounding" in op.attributes:
        body += f", rounding = {op.attributes['rounding']}"
        skip.append("rounding")
    for flag in ("allow_reorder", "efficient_layout"):
        if isinstance(op.attributes.get(flag), UnitAttr):
            body += f" {flag}"
            skip.append(flag)
    p.simple(op, depth, f"{body}{_ad(op, skip)} : {op.operands[0].type} -> {op.results[0].type}")


@_writer("program_dim")
def _w_program_dim(p: Printer, op: Operation, depth: int) -> None:
    axis = "xyz"[int(op.attributes["axis"])]
    p.simple(op, depth, f"{axis}{_ad(op, ['axis'])} : {op.result.type}")


@_writer("result_type_only")
def _w_result_type_only(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, f"{_ad(op).strip()} : {op.result.type}".strip())


@_writer("addptr")
def _w_addptr(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, f"{p.refs(op.operands)}{_ad(op)} : {op.result.type}, {op.operands[1].type}")


def _mem_kw(op: Operation) -> str:
    s = ""
    if op.attributes.get("cache", "none") != "none":
        s += f" cacheModifier = {op.attributes['cache']}"
    if op.attributes.get("evict", "evict_normal") != "evict_normal":
        s += f" evictionPolicy = {op.attributes['evict']}"
    return s


def _mem_attrs(op: Operation) -> str:
    d = {k: v for k, v in op.attributes.items() if k not in ("cache", "evict")}
    if d.get("isVolatile") is False:
        del d["isVolatile"]
    if "padding" in d:
        d["padding"] = _enum_as_int("padding", d["padding"])
    s = format_attr_dict(d)
    return f" {s}" if s else ""


@_writer("load")
@_writer("store")
def _w_load_store(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, f"{p.refs(op.operands)}{_mem_kw(op)}{_mem_attrs(op)} : {op.operands[0].type}")


def _functional_types(op: Operation) -> str:
    ins = ", ".join(map(str, op.operand_types))
    outs = [str(t) for t in op.result_types]
    return f"({ins}) -> " + (outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")")


def _leading_enum_words(op: Operation) -> tuple[str, list[str]]:
    spec = OP_SPECS[op.name]
    words = []
    skip = []
    for name, a in spec.attrs.items():
        if a.kind == "enum" and a.required and name in op.attributes:
            words.append(str(op.attributes[name]))
            skip.append(name)
    return "".join(w + ", " for w in words), skip


@_writer("atomic")
def _w_atomic(p: Printer, op: Operation, depth: int) -> None:
    lead, skip = _leading_enum_words(op)
    p.simple(op, depth, f"{lead}{p.refs(op.operands)}{_ad(op, skip)} : {_functional_types(op)}")


@_writer("functional")
def _w_functional(p: Printer, op: Operation, depth: int) -> None:
    lead, skip = _leading_enum_words(op)
    if op.name in ("tt.gather", "tt.descriptor_gather"):  # src[indices], desc[x_offsets, y_offset]
        body = f"{p.ref(op.operands[0])}[{p.refs(op.operands[1:])}]"
    else:
        body = p.refs(op.operands)
    p.simple(op, depth, f"{lead}{body}{_ad(op, skip)} : {_functional_types(op)}")


@_writer("call")
def _w_call(p: Printer, op: Operation, depth: int) -> None:
    callee = format_attr(op.attributes["callee"])
    p.simple(op, depth, f"{callee}({p.refs(op.operands)}){_ad(op, ['callee'])} : {_functional_types(op)}")


def _groups(op: Operation) -> dict[str, Any]:
    return named_operands(op)


def _base_and_lists(p: Printer, op: Operation, lists: Sequence[str]) -> str:
    """``%base, [%a, ...], [%b, ...]``: the `base` operand, then each named operand group in brackets."""
    g = _groups(op)
    return p.ref(g["base"]) + "".join(f", [{p.refs(g[name])}]" for name in lists)


@_writer("make_tensor_ptr")
def _w_make_tensor_ptr(p: Printer, op: Operation, depth: int) -> None:
    body = _base_and_lists(p, op, ("shape", "strides", "offsets"))
    p.simple(op, depth, f"{body}{_ad(op)} : {op.result.type}")


@_writer("advance")
def _w_advance(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, f"{p.ref(op.operands[0])}, [{p.refs(op.operands[1:])}]{_ad(op)} : {op.result.type}")


@_writer("make_tensor_descriptor")
def _w_make_tensor_descriptor(p: Printer, op: Operation, depth: int) -> None:
    body = _base_and_lists(p, op, ("shape", "strides"))
    p.simple(op, depth, f"{body}{_ad(op)} : {op.operands[0].type}, {op.result.type}")


@_writer("descriptor_load")
def _w_descriptor_load(p: Printer, op: Operation, depth: int) -> None:
    body = f"{p.ref(op.operands[0])}[{p.refs(op.operands[1:])}]{_mem_kw(op)}{_mem_attrs(op)}"
    p.simple(op, depth, f"{body} : {op.operands[0].type} -> {op.result.type}")


@_writer("descriptor_store")
def _w_descriptor_store(p: Printer, op: Operation, depth: int) -> None:
    desc, src, *idx = op.operands
    p.simple(op, depth, f"{p.ref(desc)}[{p.refs(idx)}], {p.ref(src)}{_ad(op)} : {desc.type}, {src.type}")


@_writer("descriptor_scatter")
def _w_descriptor_scatter(p: Printer, op: Operation, depth: int) -> None:
    desc, x_off, y_off, src = op.operands
    types = ", ".join(str(t) for t in op.operand_types)
    p.simple(op, depth, f"{p.ref(desc)}[{p.ref(x_off)}, {p.ref(y_off)}], {p.ref(src)}{_ad(op)} : {types}")


@_writer("descriptor_reduce")
def _w_descriptor_reduce(p: Printer, op: Operation, depth: int) -> None:
    desc, src, *idx = op.operands
    body = f"{op.attributes['kind']}, {p.ref(desc)}[{p.refs(idx)}], {p.ref(src)}{_ad(op, ['kind'])}"
    p.simple(op, depth, f"{body} : {desc.type}, {src.type}")


@_writer("dot")
def _w_dot(p: Printer, op: Operation, depth: int) -> None:
    a, b, _c = op.operands
    body = p.refs(op.operands)
    if op.attributes.get("inputPrecision", "ieee") != "ieee":  # Triton elides its default, ieee
        body += f", inputPrecision = {op.attributes['inputPrecision']}"
    skip = ["inputPrecision"]
    if int(op.attributes.get("maxNumImpreciseAcc", 0)) == 0:
        skip.append("maxNumImpreciseAcc")
    p.simple(op, depth, f"{body}{_ad(op, skip)} : {a.type} * {b.type} -> {op.result.type}")


@_writer("dot_scaled")
def _w_dot_scaled(p: Printer, op: Operation, depth: int) -> None:
    g = _groups(op)
    a_s = f" scale {p.ref(g['a_scale'])}" if g.get("a_scale") is not None else ""
    b_s = f" scale {p.ref(g['b_scale'])}" if g.get("b_scale") is not None else ""
    body = (
        f"{p.ref(g['a'])}{a_s}, {p.ref(g['b'])}{b_s}, {p.ref(g['c'])} lhs = {op.attributes['a_elem_type']} "
        f"rhs = {op.attributes['b_elem_type']}"
    )
    skip = ["a_elem_type", "b_elem_type", "operandSegmentSizes"]
    ta = str(g["a"].type) + (f", {g['a_scale'].type}" if a_s else "")
    tb = str(g["b"].type) + (f", {g['b_scale'].type}" if b_s else "")
    p.simple(op, depth, f"{body}{_ad(op, skip)} : {ta} * {tb} -> {op.result.type}")


@_writer("return_like")
def _w_return_like(p: Printer, op: Operation, depth: int) -> None:
    body = _ad(op).strip()
    if op.operands:
        body = (body + " " if body else "") + p.typed_refs(op.operands)
    p.simple(op, depth, body)


@_writer("clampf")
def _w_clampf(p: Printer, op: Operation, depth: int) -> None:
    p.simple(
        op,
        depth,
        f"{p.refs(op.operands)}, propagateNan = {op.attributes['propagateNan']}"
        f"{_ad(op, ['propagateNan'])} : {op.result.type}",
    )


@_writer("print")
def _w_print(p: Printer, op: Operation, depth: int) -> None:
    body = quote(op.attributes["prefix"]) + _ad(op, ["prefix"])
    if op.operands:
        body += " : " + p.typed_refs(op.operands)
    p.simple(op, depth, body)


@_writer("assert")
def _w_assert(p: Printer, op: Operation, depth: int) -> None:
    c = op.operands[0]
    p.simple(op, depth, f"{p.ref(c)}, {quote(op.attributes['message'])}{_ad(op, ['message'])} : {c.type}")


@_writer("inline_asm")
def _w_inline_asm(p: Printer, op: Operation, depth: int) -> None:
    body = quote(op.attributes["asm_string"]) + _ad(op, ["asm_string"])
    if op.operands:
        body += " " + p.typed_refs(op.operands)
    p.simple(op, depth, f"{body} -> " + ", ".join(map(str, op.result_types)))


@_writer("bare")
def _w_bare(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, _ad(op).strip())


@_writer("math_fpowi")
def _w_math_fpowi(p: Printer, op: Operation, depth: int) -> None:
    a, b = op.operands
    p.simple(op, depth, f"{p.refs(op.operands)}{_mods(op)}{_ad(op, ['fastmath'])} : {a.type}, {b.type}")


@_writer("math_predicate")
def _w_math_predicate(p: Printer, op: Operation, depth: int) -> None:
    a = op.operands[0]
    p.simple(op, depth, f"{p.ref(a)}{_mods(op)}{_ad(op, ['fastmath'])} : {a.type}")


def _types_paren(ts: Sequence[Type]) -> str:
    return "(" + ", ".join(map(str, ts)) + ")"


@_writer("scf_for")
def _w_scf_for(p: Printer, op: Operation, depth: int) -> None:
    lb, ub, step, *inits = op.operands
    body = op.regions[0].entry
    head = p.define_results(op) + "scf.for "
    iv = p.define(body.args[0])
    head += f"{iv} = {p.ref(lb)} to {p.ref(ub)} step {p.ref(step)}"
    if inits:
        pairs = ", ".join(f"{p.define(a)} = {p.ref(v)}" for a, v in zip(body.args[1:], inits, strict=True))
        head += f" iter_args({pairs}) -> {_types_paren(op.result_types)}"
    head += f" : {body.args[0].type}"
    tail = format_attr_dict(op.attributes)
    p.with_regions(op, depth, head, [("", op.regions[0], True)], tail)


@_writer("scf_if")
def _w_scf_if(p: Printer, op: Operation, depth: int) -> None:
    head = p.define_results(op) + f"scf.if {p.ref(op.operands[0])}"
    if op.results:
        head += f" -> {_types_paren(op.result_types)}"
    parts = [("", op.regions[0], True)]
    if len(op.regions) > 1 and op.regions[1].blocks:
        parts.append(("else", op.regions[1], True))
    p.with_regions(op, depth, head, parts, format_attr_dict(op.attributes))


@_writer("scf_while")
def _w_scf_while(p: Printer, op: Operation, depth: int) -> None:
    before = op.regions[0].entry
    head = p.define_results(op) + "scf.while ("
    head += ", ".join(f"{p.define(a)} = {p.ref(v)}" for a, v in zip(before.args, op.operands, strict=True))
    head += f") : {_types_paren(op.operand_types)} -> {_types_paren(op.result_types)}"
    attrs = format_attr_dict(op.attributes)
    if attrs:
        head += f" attributes {attrs}"
    p.with_regions(op, depth, head, [("", op.regions[0], True), ("do", op.regions[1], False)])


@_writer("scf_condition")
def _w_scf_condition(p: Printer, op: Operation, depth: int) -> None:
    c, *args = op.operands
    body = f"({p.ref(c)}){_ad(op)}"
    if args:
        body += " " + p.typed_refs(args)
    p.emit(depth, f"scf.condition{body}{p.loc(op.location)}")


def _succ(p: Printer, b: Block, vals: Sequence[Value]) -> str:
    if not vals:
        return p.block_name(b)
    return f"{p.block_name(b)}({p.typed_refs(vals)})"


@_writer("cf_br")
def _w_cf_br(p: Printer, op: Operation, depth: int) -> None:
    p.simple(op, depth, _succ(p, op.successors[0], op.operands) + _ad(op))


@_writer("cf_cond_br")
def _w_cf_cond_br(p: Printer, op: Operation, depth: int) -> None:
    g = _groups(op)
    body = (
        f"{p.ref(g['condition'])}, {_succ(p, op.successors[0], g['trueDestOperands'])}, "
        f"{_succ(p, op.successors[1], g['falseDestOperands'])}"
    )
    p.simple(op, depth, body + _ad(op, ["operandSegmentSizes"]))


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
