"""Attribute and literal text of the tile-IR printer: quoting, floats, dense elements, attribute
dictionaries (shared by the printer and its op forms)."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Sequence
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
from lowering.ir.location import Location
from lowering.ir.types import FloatType, IntType, Type, f32

_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$\-]*(\([0-9][0-9, ]*\)[A-Za-z0-9_.$\-]*)*$")
_DOTTED_KEY = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+$")

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


def dense_body(d: DenseAttr) -> str:
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
        return f"dense<{dense_body(v)}> : {v.type}"
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
