"""Rules of the lark transformer for types, attribute values and locations, with the literal
decoders they use (strings, hex floats, dense elements). `lowering.ttir.raw.RawTransformer` extends
`TypeAttrRules` with the rules for ops, regions and modules."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from lark import Token, Transformer, v_args

from lowering.ir.attributes import (
    UNIT,
    DenseArray,
    DenseAttr,
    FloatAttr,
    IntAttr,
    OpaqueAttr,
    SymbolRef,
    numpy_dtype,
)
from lowering.ir.types import (
    FloatType,
    IndexType,
    IntType,
    NoneType,
    OpaqueType,
    PointerType,
    TensorDescType,
    TensorType,
    Type,
    f64,
    i64,
)

RawLoc = tuple[Any, ...]  # ("ref", name) | ("file", f, l, c) | ("name", n, child) | ("callsite", a, b) | ...


def decode_string(tok: str) -> str:
    """An MLIR string literal (with quotes) → its text (``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\XX`` hex)."""
    s = tok[1:-1]
    if "\\" not in s:
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt in '"\\':
                out += nxt.encode()
                i += 2
                continue
            if nxt == "n":
                out += b"\n"
                i += 2
                continue
            if nxt == "t":
                out += b"\t"
                i += 2
                continue
            hexpair = s[i + 1 : i + 3]
            if len(hexpair) == 2 and all(h in "0123456789abcdefABCDEF" for h in hexpair):
                out.append(int(hexpair, 16))
                i += 3
                continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


def _float_from_hex(bits: int, t: Type) -> float:
    width = t.bitwidth if isinstance(t, FloatType) else 64
    if width == 32:
        return float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])
    if width == 64:
        return float(struct.unpack("<d", struct.pack("<Q", bits))[0])
    dt = numpy_dtype(t)
    raw = np.array([bits], dtype={8: np.uint8, 16: np.uint16}[dt.itemsize * 8]).view(dt)
    return float(raw[0].astype(np.float64))


def _number(tok: Token) -> int | float:
    s = str(tok)
    if tok.type == "HEX_INT":
        return int(s, 16)
    if tok.type == "FLOAT":
        return float(s)
    return int(s)


def _dense_value(body: Any, t: TensorType) -> DenseAttr:
    dt = numpy_dtype(t.element)
    if isinstance(body, str) and body.startswith("0x") and len(body) > 2 and isinstance(body, _HexBlob):
        raw = bytes.fromhex(body[2:])
        itemsize = dt.itemsize
        count = len(raw) // itemsize
        arr = np.frombuffer(raw, dtype=dt, count=count).copy()
        arr = np.broadcast_to(arr, t.dims).copy() if count == 1 else arr.reshape(t.dims)
        return DenseAttr(arr, t, True if count == 1 else None)
    if not isinstance(body, list):  # splat
        val = _element(body, t.element)
        arr = (
            np.full(t.dims, val, dtype=dt)
            if not isinstance(val, np.ndarray)
            else np.broadcast_to(val, t.dims)
        )
        return DenseAttr(np.asarray(arr), t, True)
    flat = _flatten(body)
    if len(flat) != t.numel:
        raise ValueError(f"dense<...> lists {len(flat)} elements but {t} holds {t.numel}")
    vals = [_element(v, t.element) for v in flat]
    arr = np.array([np.asarray(v).reshape(()) for v in vals], dtype=dt).reshape(t.dims)
    return DenseAttr(arr, t)


class _HexBlob(str):
    """A ``"0x..."`` string inside ``dense<...>``: raw little-endian element bytes."""


def _flatten(body: Any) -> list[Any]:
    if isinstance(body, list):
        out: list[Any] = []
        for b in body:
            out.extend(_flatten(b))
        return out
    return [body]


def _element(v: Any, elem: Type) -> Any:
    """One dense element: ints, floats, bools, or a ``("hex", bits)`` float bit pattern."""
    if isinstance(v, tuple) and v[0] == "hex":
        if isinstance(elem, FloatType):
            dt = numpy_dtype(elem)
            nbits = dt.itemsize * 8
            ut = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[nbits]
            return np.array([v[1]], dtype=ut).view(dt)[0]
        return v[1]
    return v


_LOC_FILE = re.compile(r'loc\(("(?:[^"\\]|\\.)*"):([0-9]+):([0-9]+)\)')
_LOC_NAMED_REF = re.compile(r'loc\(("(?:[^"\\]|\\.)*")\((#[A-Za-z0-9_.$\-]+)\)\)')


def _symbol_name(tok: Token) -> str:
    s = str(tok)[1:]
    return decode_string(s) if s.startswith('"') else s


def _scalar_token(tok: Token) -> Any:
    s = str(tok)
    if s == "true":
        return True
    if s == "false":
        return False
    if tok.type == "HEX_INT":
        return ("hex", int(s, 16))
    if tok.type == "STRING":
        return _HexBlob(decode_string(s)) if s[1:3] == "0x" else decode_string(s)
    if tok.type == "FLOAT":
        return float(s)
    return int(s)


def _attr_text(v: Any) -> str:
    from lowering.ir.attr_format import format_attr

    return format_attr(v)


@v_args(inline=True)
class TypeAttrRules(Transformer):  # type: ignore[type-arg]
    """Types, attribute values and locations (they need no context). A type token's text is read by
    `parse_type` (the parser's own `stype` rule, `lowering.ttir.parser.parse_type_text`)."""

    def __init__(self, parse_type: Callable[[str], Type]) -> None:
        super().__init__()
        self._parse_type = parse_type

    # ------------------------------------------------------------------ types
    def type_token(self, tok: Token) -> Type:
        return self._parse_type(str(tok))

    def int_type(self, tok: Token) -> Type:
        s = str(tok)
        if s[0] in "su":
            return OpaqueType(s)
        return IntType(int(s[1:]))

    def float_type(self, tok: Token) -> Type:
        return FloatType(str(tok))

    def index_type(self) -> Type:
        return IndexType()

    def none_type(self) -> Type:
        return NoneType()

    def tensor_type(self, open_tok: Token, elem: Type, encoding: Any = None) -> Type:
        dims = tuple(int(d) for d in str(open_tok)[len("tensor<") :].split("x") if d)
        enc = None if encoding is None else _attr_text(encoding)
        return TensorType(dims, elem, enc)

    def ptr_type(self, pointee: Type, space: Token | None = None) -> Type:
        return PointerType(pointee, int(space) if space is not None else 1)

    def desc_type(self, block: Type) -> Type:
        if not isinstance(block, TensorType):
            raise ValueError(f"!tt.tensordesc wants a tensor type, got {block}")
        return TensorDescType(block)

    def opaque_type(self, name: Token, *params: Any) -> Type:
        if params:
            return OpaqueType(f"{name}<{', '.join(_attr_text(p) for p in params)}>")
        return OpaqueType(str(name))

    def opaque_param(self, p: Any) -> Any:
        return p

    def function_type(self, *parts: Any) -> tuple[list[Type], list[Type]]:
        if len(parts) == 1:
            return [], parts[0]
        return parts[0], parts[1]

    def fn_inputs(self, *types: Type) -> list[Type]:
        return list(types)

    def fn_results(self, *types: Type) -> list[Type]:
        return list(types)

    # ------------------------------------------------------------------ attributes
    def attr_dict(self, *entries: tuple[str, Any]) -> dict[str, Any]:
        return dict(entries)

    def attr_entry(self, key: Token, value: Any = UNIT) -> tuple[str, Any]:
        k = decode_string(str(key)) if key.type == "STRING" else str(key)
        return k, value

    def int_attr(self, tok: Token, t: Type | None = None) -> Any:
        if t is not None and isinstance(t, FloatType):
            return FloatAttr(float(int(tok)), t)
        if t is not None and t == IntType(1):
            return bool(int(tok))
        return IntAttr(int(tok), t if t is not None else i64)

    def float_attr(self, tok: Token, t: Type | None = None) -> Any:
        return FloatAttr(float(tok), t if t is not None else f64)

    def hex_attr(self, tok: Token, t: Type | None = None) -> Any:
        if t is not None and isinstance(t, FloatType):
            return FloatAttr(_float_from_hex(int(str(tok), 16), t), t)
        return IntAttr(int(str(tok), 16), t if t is not None else i64)

    def true_attr(self, *_: Any) -> bool:
        return True

    def false_attr(self, *_: Any) -> bool:
        return False

    def string_attr(self, tok: Token) -> str:
        return decode_string(str(tok))

    def list_attr(self, *vals: Any) -> list[Any]:
        return list(vals)

    def dict_attr(self, d: dict[str, Any]) -> dict[str, Any]:
        return d

    def type_attr(self, t: Type) -> Type:
        return t

    def symbol_attr(self, tok: Token) -> SymbolRef:
        return SymbolRef(_symbol_name(tok))

    def word_attr(self, tok: Token) -> str:
        return str(tok)

    def unit_attr(self) -> Any:
        return UNIT

    def attr_value(self, v: Any) -> Any:
        return v

    def dense_attr(self, *args: Any) -> DenseAttr:
        t = args[-1]
        if not isinstance(t, TensorType):
            raise ValueError(f"dense<...> needs a tensor type, got {t}")
        if len(args) == 1:
            return DenseAttr(np.zeros(t.dims, dtype=numpy_dtype(t.element)), t)
        return _dense_value(args[0], t)

    def dense_list(self, *items: Any) -> list[Any]:
        return list(items)

    def dense_scalar(self, tok: Token | None = None) -> Any:
        if tok is None:
            raise ValueError("empty dense scalar")
        return _scalar_token(tok)

    def array_attr(self, t: Type, *elems: Any) -> DenseArray:
        vals: list[Any] = []
        for e in elems:
            if isinstance(t, IntType) and t.width == 1:
                vals.append(bool(e))
            elif isinstance(t, FloatType):
                vals.append(float(e))
            else:
                vals.append(int(e))
        return DenseArray(vals, t)

    def array_elem(self, tok: Token | None = None) -> Any:
        return _scalar_token(tok) if tok is not None else None

    def hash_attr(self, name: Token, *params: Any) -> OpaqueAttr:
        if params:
            return OpaqueAttr(f"{name}<{', '.join(_attr_text(p) for p in params)}>")
        return OpaqueAttr(str(name))

    def hash_param(self, p: Any) -> Any:
        return p

    # ------------------------------------------------------------------ locations
    def location(self, body: RawLoc) -> RawLoc:
        return body

    def loc_ref_token(self, tok: Token) -> RawLoc:
        return ("ref", str(tok)[4:-1])

    def loc_file_token(self, tok: Token) -> RawLoc:
        m = _LOC_FILE.fullmatch(str(tok))
        assert m is not None
        return ("file", decode_string(m.group(1)), int(m.group(2)), int(m.group(3)))

    def loc_named_ref_token(self, tok: Token) -> RawLoc:
        m = _LOC_NAMED_REF.fullmatch(str(tok))
        assert m is not None
        return ("name", decode_string(m.group(1)), ("ref", m.group(2)))

    def loc_callsite_token(self, tok: Token) -> RawLoc:
        callee, caller = str(tok)[len("loc(callsite(") : -2].split(" at ")
        return ("callsite", ("ref", callee), ("ref", caller))

    def loc_ref(self, tok: Token) -> RawLoc:
        return ("ref", str(tok))

    def loc_unknown(self) -> RawLoc:
        return ("unknown",)

    def loc_file(self, f: Token, line: Token, col: Token, *_rest: Token) -> RawLoc:
        return ("file", decode_string(str(f)), int(line), int(col))

    def loc_name(self, name: Token, child: RawLoc | None = None) -> RawLoc:
        return ("name", decode_string(str(name)), child)

    def loc_callsite(self, callee: RawLoc, caller: RawLoc) -> RawLoc:
        return ("callsite", callee, caller)

    def loc_fused(self, *parts: Any) -> RawLoc:
        locs = [p for p in parts if isinstance(p, tuple)]
        return ("fused", locs)

    # ------------------------------------------------------------------ items of custom ops
