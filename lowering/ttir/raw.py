"""The lark transformer: TTIR parse tree → raw op records (names, items, attribute values, types).

Types and attribute values are built here (they need no context). SSA values, blocks and
locations are resolved afterwards by `lowering.ttir.builder`, which needs scopes and aliases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lark import Token, v_args

from lowering.ir.attributes import (
    DenseArray,
    DenseAttr,
    OpaqueAttr,
)
from lowering.ir.types import (
    Type,
)
from lowering.ttir.raw_attrs import (
    RawLoc,
    TypeAttrRules,
    _symbol_name,
    decode_string,
)

__all__ = [
    "Item",
    "RawOp",
    "RawBlock",
    "RawRegion",
    "RawFunc",
    "RawModule",
    "RawTransformer",
    "decode_string",
]


@dataclass
class Item:
    """One element of a custom op's body: `kind` is value/word/type/int/float/hex/string/symbol/block/
    attr_dict/region/dense/array/hash/punct; `value` its payload; `line`/`col` in the TTIR (0 if unknown)."""

    kind: str
    value: Any
    line: int = 0
    col: int = 0

    def __repr__(self) -> str:
        return f"{self.kind}:{self.value!r}"


@dataclass
class RawBlock:
    label: str | None
    args: list[tuple[str, Type, RawLoc | None]]
    ops: list[Any] = field(default_factory=list)


@dataclass
class RawRegion:
    blocks: list[RawBlock]
    line: int = 0


@dataclass
class RawOp:
    name: str
    line: int
    col: int
    results: list[tuple[str, int]] = field(default_factory=list)  # (name, count)
    items: list[Item] | None = None  # custom form
    operands: list[str] | None = None  # generic form
    successors: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[RawRegion] = field(default_factory=list)
    func_type: Any = None
    loc: RawLoc | None = None


@dataclass
class RawFunc:
    name: str
    visibility: str | None
    args: list[tuple[str | None, Type, dict[str, Any], RawLoc | None]]
    results: list[Type]
    attrs: dict[str, Any]
    body: RawRegion | None
    loc: RawLoc | None
    line: int


@dataclass
class RawModule:
    funcs: list[RawFunc]
    attrs: dict[str, Any]
    loc: RawLoc | None
    aliases: dict[str, Any]


@v_args(inline=True)
class RawTransformer(TypeAttrRules):
    """Bottom-up conversion of lark's tree into raw records (used as lark's inline transformer)."""

    def item_value(self, tok: Token) -> Item:
        return Item("value", str(tok)[1:], tok.line or 0, tok.column or 0)

    def item_word(self, w: Token | str) -> Item:
        if isinstance(w, Token):
            return Item("word", str(w), w.line or 0, w.column or 0)
        return Item("word", w)

    def bare_word(self, tok: Token) -> Token:
        return tok

    def kw_at(self) -> str:
        return "at"

    def kw_to(self) -> str:
        return "to"

    def kw_unknown(self) -> str:
        return "unknown"

    def kw_attributes(self) -> str:
        return "attributes"

    def kw_dense(self) -> str:
        return "dense"

    def kw_array(self) -> str:
        return "array"

    def kw_index(self) -> str:
        return "index"

    def kw_none(self) -> str:
        return "none"

    def kw_unit(self) -> str:
        return "unit"

    def item_type(self, t: Type) -> Item:
        return Item("type", t)

    def item_int(self, tok: Token) -> Item:
        return Item("int", int(tok), tok.line or 0, tok.column or 0)

    def item_float(self, tok: Token) -> Item:
        return Item("float", float(tok), tok.line or 0, tok.column or 0)

    def item_hex(self, tok: Token) -> Item:
        return Item("hex", int(str(tok), 16), tok.line or 0, tok.column or 0)

    def item_string(self, tok: Token) -> Item:
        return Item("string", decode_string(str(tok)), tok.line or 0, tok.column or 0)

    def item_symbol(self, tok: Token) -> Item:
        return Item("symbol", _symbol_name(tok), tok.line or 0, tok.column or 0)

    def item_block(self, tok: Token) -> Item:
        return Item("block", str(tok), tok.line or 0, tok.column or 0)

    def item_punct(self, tok: Token) -> Item:
        return Item("punct", str(tok), tok.line or 0, tok.column or 0)

    def item_comma(self) -> Item:
        return Item("punct", ",")

    def item_lparen(self) -> Item:
        return Item("punct", "(")

    def item_rparen(self) -> Item:
        return Item("punct", ")")

    def item_lbracket(self) -> Item:
        return Item("punct", "[")

    def item_rbracket(self) -> Item:
        return Item("punct", "]")

    def item_equal(self) -> Item:
        return Item("punct", "=")

    def item_colon(self) -> Item:
        return Item("punct", ":")

    def item_langle(self) -> Item:
        return Item("punct", "<")

    def item_rangle(self) -> Item:
        return Item("punct", ">")

    def item_arrow(self) -> Item:
        return Item("punct", "->")

    # ------------------------------------------------------------------ ops, blocks, regions
    def result_def(self, tok: Token) -> tuple[str, int]:
        s = str(tok)[1:]
        if tok.type == "RESULT_PACK":
            name, n = s.rsplit(":", 1)
            return name, int(n)
        return s, 1

    def results(self, *defs: tuple[str, int]) -> list[tuple[str, int]]:
        return list(defs)

    def custom_op(self, name: Token, *items: Any) -> RawOp:
        its = [i if isinstance(i, Item) else _wrap_item(i) for i in items]
        return RawOp(str(name), name.line or 0, name.column or 0, items=its)

    def value_list(self, *toks: Token) -> list[str]:
        return [str(t)[1:] for t in toks]

    def successors(self, *toks: Token) -> list[str]:
        return [str(t) for t in toks]

    def prop_dict(self, d: dict[str, Any]) -> dict[str, Any]:
        return {"__props__": d}

    def generic_regions(self, *regions: RawRegion) -> list[RawRegion]:
        return list(regions)

    def generic_op(self, name: Token, *rest: Any) -> RawOp:
        op = RawOp(decode_string(str(name)), name.line or 0, name.column or 0, operands=[])
        for r in rest:
            if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], list):
                op.func_type = r
            elif isinstance(r, dict) and "__props__" in r and len(r) == 1:
                op.props = r["__props__"]
            elif isinstance(r, dict):
                op.attrs = r
            elif isinstance(r, list) and r and isinstance(r[0], RawRegion):
                op.regions = r
            elif isinstance(r, list) and r and isinstance(r[0], str) and r[0].startswith("^"):
                op.successors = r
            elif isinstance(r, list):
                op.operands = r
        return op

    def op(self, *parts: Any) -> Any:
        if len(parts) == 1 and isinstance(parts[0], RawFunc):
            return parts[0]
        results: list[tuple[str, int]] = []
        raw: RawOp | RawFunc | None = None
        loc = None
        for p in parts:
            if isinstance(p, list):
                results = p
            elif isinstance(p, RawOp | RawFunc):
                raw = p
            else:
                loc = p
        assert isinstance(raw, RawOp)
        raw.results = results
        raw.loc = loc
        return raw

    def block_arg(self, tok: Token, t: Type, loc: RawLoc | None = None) -> tuple[str, Type, RawLoc | None]:
        return str(tok)[1:], t, loc

    def block_label(self, tok: Token, *args: Any) -> RawBlock:
        return RawBlock(str(tok), list(args))

    def region(self, *items: Any) -> RawRegion:
        blocks: list[RawBlock] = []
        for it in items:
            if isinstance(it, RawBlock):
                blocks.append(it)
            else:
                if not blocks:
                    blocks.append(RawBlock(None, []))
                blocks[-1].ops.append(it)
        return RawRegion(blocks)

    # ------------------------------------------------------------------ functions and module
    def func_arg(self, *parts: Any) -> tuple[str | None, Type, dict[str, Any], RawLoc | None]:
        name: str | None = None
        t: Type | None = None
        attrs: dict[str, Any] = {}
        loc = None
        for p in parts:
            if isinstance(p, Token):
                name = str(p)[1:]
            elif isinstance(p, Type):
                t = p
            elif isinstance(p, dict):
                attrs = p
            else:
                loc = p
        assert t is not None
        return name, t, attrs, loc

    def func_args(self, *args: Any) -> list[Any]:
        return list(args)

    def func_result(self, t: Type, _attrs: Any = None) -> Type:
        return t

    def func_results(self, *ts: Type) -> list[Type]:
        return list(ts)

    def func_op(self, *parts: Any) -> RawFunc:
        visibility: str | None = None
        name = ""
        args: list[Any] = []
        results: list[Type] = []
        attrs: dict[str, Any] = {}
        body: RawRegion | None = None
        loc = None
        line = 0
        seen_args = False
        for p in parts:
            if isinstance(p, Token) and p.type == "BARE_ID":
                visibility = str(p)
            elif isinstance(p, Token) and p.type == "SYMBOL_REF":
                name = _symbol_name(p)
                line = p.line or 0
            elif isinstance(p, list) and not seen_args and (not p or isinstance(p[0], tuple)):
                args = p
                seen_args = True
            elif isinstance(p, list):
                results = p
            elif isinstance(p, dict):
                attrs = p
            elif isinstance(p, RawRegion):
                body = p
            elif isinstance(p, tuple):
                loc = p
        return RawFunc(name, visibility, args, results, attrs, body, loc, line)

    def module(self, *parts: Any) -> RawModule:
        attrs: dict[str, Any] = {}
        region: RawRegion | None = None
        loc = None
        for p in parts:
            if isinstance(p, dict):
                attrs = p
            elif isinstance(p, RawRegion):
                region = p
            elif isinstance(p, tuple):
                loc = p
        funcs = [op for b in (region.blocks if region else []) for op in b.ops]
        return RawModule(funcs, attrs, loc, {})

    def alias_def(self, name: Token, value: Any) -> tuple[str, str, Any]:
        return ("alias", str(name), value)

    def start(self, *tops: Any) -> RawModule:
        aliases: dict[str, Any] = {}
        module: RawModule | None = None
        loose: list[Any] = []
        for t in tops:
            if isinstance(t, tuple) and t and t[0] == "alias":
                aliases[t[1]] = t[2]
            elif isinstance(t, RawModule):
                if module is not None:
                    raise ValueError("more than one module in the TTIR text")
                module = t
            else:
                loose.append(t)
        if module is None:
            module = RawModule(loose, {}, None, {})
        else:
            module.funcs.extend(loose)
        module.aliases = aliases
        return module


def _wrap_item(v: Any) -> Item:
    if isinstance(v, dict):
        return Item("attr_dict", v)
    if isinstance(v, RawRegion):
        return Item("region", v)
    if isinstance(v, DenseAttr):
        return Item("dense", v)
    if isinstance(v, DenseArray):
        return Item("array", v)
    if isinstance(v, OpaqueAttr):
        return Item("hash", v)
    raise TypeError(f"unexpected custom-op item {v!r}")
