"""Readers of the custom (pretty) op forms, one per syntax family named in the op registry.

The grammar keeps a custom op's body as a flat list of `Item`s; a reader walks it with a `Cursor`
and returns the op's operands, result types, attributes, regions and successors, as MLIR's own
custom parsers do. ``READERS[spec.syntax]`` is the reader of an op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lowering.ir.attributes import UNIT, DenseArray, DenseAttr, FloatAttr, IntAttr
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import UNKNOWN_LOC
from lowering.ir.registry import ENUMS, OpSpec, registrar
from lowering.ir.types import (
    FloatType,
    IntType,
    PointerType,
    TensorDescType,
    TensorType,
    Type,
    i1,
    i32,
    with_element_type,
    with_shape,
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


# ---------------------------------------------------------------------------------------- families
@_reader("constant")
def _constant(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed()
    cur.accept_attr_dict(p.attrs)
    it = cur.peek()
    if it is None:
        raise cur.fail("a constant value")
    if it.kind == "dense":
        cur.pos += 1
        dense: DenseAttr = it.value
        p.attrs["value"] = dense
        p.result_types = [dense.type]
    elif it.kind == "word" and it.value in ("true", "false"):
        cur.pos += 1
        p.attrs["value"] = it.value == "true"
        p.result_types = [i1]
    elif it.kind in ("int", "float", "hex"):
        cur.pos += 1
        cur.expect_punct(":")
        t = cur.expect_type()
        p.attrs["value"] = _typed_number(it, t)
        p.result_types = [t]
    else:
        raise cur.fail("a constant (number, true/false or dense<...>)")
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


def _typed_number(it: Item, t: Type) -> Any:
    from lowering.ttir.raw import _float_from_hex

    if isinstance(t, FloatType):
        if it.kind == "hex":
            return FloatAttr(_float_from_hex(int(it.value), t), t)
        return FloatAttr(float(it.value), t)
    if isinstance(t, IntType) and t.width == 1:
        return bool(it.value)
    return IntAttr(int(it.value), t)


@_reader("same_type")
def _same_type(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _modifiers(cur, p)
    _trailing(cur, p)
    t = cur.expect_type()
    cur.done()
    p.result_types = [t]
    return p


def _modifiers(cur: Cursor, p: Parsed) -> None:
    """``fastmath<fast>`` / ``overflow<nsw>`` modifiers of arith ops."""
    while cur.is_word() and cur.is_punct("<", 1):
        key = cur.expect_word()
        cur.expect_punct("<")
        words = [cur.expect_word()]
        while cur.accept_punct(","):
            words.append(cur.expect_word())
        cur.expect_punct(">")
        p.attrs[key] = ",".join(words)


@_reader("cmp")
def _cmp(cur: Cursor, spec: OpSpec) -> Parsed:
    pred = cur.expect_word(list(ENUMS[spec.attrs["predicate"].enum or ""]))
    cur.expect_punct(",")
    p = Parsed(operands=cur.value_list(), attrs={"predicate": pred})
    _modifiers(cur, p)
    _trailing(cur, p)
    t = cur.expect_type()
    cur.done()
    p.result_types = [with_element_type(t, i1)]
    return p


@_reader("select")
def _select(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _trailing(cur, p)
    ts = cur.type_list()
    cur.done()
    p.result_types = [ts[-1]]
    return p


@_reader("cast_to")
def _cast_to(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    _modifiers(cur, p)
    _trailing(cur, p)
    cur.expect_type()
    cur.expect_word(["to"])
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("arrow_cast")
def _arrow_cast(cur: Cursor, spec: OpSpec) -> Parsed:
    """``%a (, %b)* (, key = word)* (word)* attr-dict : T -> R`` (splat, broadcast, split, fp_to_fp...)."""
    p = Parsed(operands=cur.value_list())
    while cur.accept_punct(","):
        key = cur.expect_word()
        cur.expect_punct("=")
        p.attrs[key] = cur.expect_word()
    while cur.is_word():
        p.attrs[cur.expect_word()] = UNIT
    _trailing(cur, p)
    cur.expect_type()
    cur.expect_punct("->")
    r = cur.expect_type()
    cur.done()
    n = spec.num_results if spec.num_results is not None else 1
    p.result_types = [r] * n
    return p


@_reader("program_dim")
def _program_dim(cur: Cursor, spec: OpSpec) -> Parsed:
    axis = cur.expect_word(list(ENUMS["program_dim"]))
    p = Parsed(attrs={"axis": IntAttr(ENUMS["program_dim"][axis], i32)})
    _trailing(cur, p)
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("result_type_only")
def _result_type_only(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed()
    _trailing(cur, p)
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("addptr")
def _addptr(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _trailing(cur, p)
    p.result_types = [cur.expect_type()]
    cur.expect_punct(",")
    cur.expect_type()
    cur.done()
    return p


def _mem_keywords(cur: Cursor, p: Parsed) -> None:
    while True:
        if cur.accept_word("cacheModifier"):
            cur.expect_punct("=")
            p.attrs["cache"] = cur.expect_word(list(ENUMS["cache"]))
        elif cur.accept_word("evictionPolicy"):
            cur.expect_punct("=")
            p.attrs["evict"] = cur.expect_word(list(ENUMS["evict"]))
        elif cur.accept_word("volatile"):
            p.attrs["isVolatile"] = True
        else:
            return


def loaded_type(ptr_type: Type) -> Type:
    """What ``tt.load`` of a pointer (tensor) type gives: the pointee with the pointer's shape."""
    elem = ptr_type.element_type
    if isinstance(elem, PointerType):
        if isinstance(elem.pointee, TensorType):  # block pointer
            return elem.pointee
        return with_shape(elem.pointee, ptr_type.shape)
    raise TypeError(f"not a pointer type: {ptr_type}")


@_reader("load")
def _load(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _mem_keywords(cur, p)
    _trailing(cur, p)
    pt = cur.expect_type()
    cur.done()
    try:
        p.result_types = [loaded_type(pt)]
    except TypeError as exc:
        raise cur.fail(f"a pointer type ({exc})") from None
    return p


@_reader("store")
def _store(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _mem_keywords(cur, p)
    _trailing(cur, p)
    cur.expect_type()
    cur.done()
    return p


def _leading_enums(cur: Cursor, spec: OpSpec, p: Parsed) -> None:
    """Enum keywords before the operands (``tt.atomic_rmw fadd, acq_rel, gpu, %p, ...``)."""
    for name, a in spec.attrs.items():
        if a.kind != "enum" or not a.required or not cur.is_word():
            continue
        p.attrs[name] = cur.expect_word(list(ENUMS[a.enum or ""]))
        cur.expect_punct(",")


def _functional_tail(cur: Cursor, p: Parsed) -> None:
    _trailing(cur, p)
    cur.paren_type_list()
    cur.expect_punct("->")
    p.result_types = cur.paren_type_list()
    cur.done()


@_reader("atomic")
def _atomic(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed()
    _leading_enums(cur, spec, p)
    p.operands = cur.value_list()
    _functional_tail(cur, p)
    return p


@_reader("functional")
def _functional(cur: Cursor, spec: OpSpec) -> Parsed:
    """``operands attr-dict : (types) -> results``; operands may be split by ``[ ]`` (gather)."""
    p = Parsed()
    _leading_enums(cur, spec, p)
    while True:
        p.operands += cur.value_list()
        if cur.accept_punct("[") or cur.accept_punct("]") or cur.accept_punct(","):
            continue
        break
    _functional_tail(cur, p)
    return p


@_reader("call")
def _call(cur: Cursor, spec: OpSpec) -> Parsed:
    sym = cur.next("symbol", "a callee (@name)")
    from lowering.ir.attributes import SymbolRef

    p = Parsed(attrs={"callee": SymbolRef(sym.value)})
    cur.expect_punct("(")
    p.operands = cur.value_list()
    cur.expect_punct(")")
    _functional_tail(cur, p)
    return p


def _bracket_values(cur: Cursor) -> list[Value]:
    cur.expect_punct("[")
    vals = cur.value_list()
    cur.expect_punct("]")
    return vals


@_reader("make_tensor_ptr")
def _make_tensor_ptr(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    for _ in range(3):
        cur.expect_punct(",")
        p.operands += _bracket_values(cur)
    _trailing(cur, p)
    p.result_types = [cur.expect_short_type(PointerType)]
    cur.done()
    return p


@_reader("advance")
def _advance(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    cur.expect_punct(",")
    p.operands += _bracket_values(cur)
    _trailing(cur, p)
    p.result_types = [cur.expect_short_type(PointerType)]
    cur.done()
    return p


@_reader("make_tensor_descriptor")
def _make_tensor_descriptor(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    for _ in range(2):
        cur.expect_punct(",")
        p.operands += _bracket_values(cur)
    _trailing(cur, p)
    cur.expect_short_type(PointerType)
    cur.expect_punct(",")
    p.result_types = [cur.expect_short_type(_desc_type)]
    cur.done()
    return p


def _desc_type(inner: Type) -> Type:
    if not isinstance(inner, TensorType):
        raise TypeError(f"a tensor descriptor wraps a tensor type, got {inner}")
    return TensorDescType(inner)


@_reader("descriptor_load")
def _descriptor_load(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    p.operands += _bracket_values(cur)
    _mem_keywords(cur, p)
    _trailing(cur, p)
    cur.expect_type()
    cur.expect_punct("->")
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


def _desc_index_src(cur: Cursor) -> list[Value]:
    """``%desc[%i, %j], %src`` → the operands in their stored order: desc, src, indices."""
    desc = cur.expect_value()
    idx = _bracket_values(cur)
    cur.expect_punct(",")
    src = cur.expect_value()
    return [desc, src, *idx]


@_reader("descriptor_store")
def _descriptor_store(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=_desc_index_src(cur))
    _trailing(cur, p)
    cur.expect_type()
    cur.expect_punct(",")
    cur.expect_type()
    cur.done()
    return p


@_reader("descriptor_scatter")
def _descriptor_scatter(cur: Cursor, spec: OpSpec) -> Parsed:
    """``tt.descriptor_scatter %desc[%x_offsets, %y_offset], %src : types``."""
    p = Parsed(operands=[cur.expect_value()])
    p.operands += _bracket_values(cur)
    cur.expect_punct(",")
    p.operands.append(cur.expect_value())
    _trailing(cur, p)
    cur.type_list()
    cur.done()
    return p


@_reader("descriptor_reduce")
def _descriptor_reduce(cur: Cursor, spec: OpSpec) -> Parsed:
    """``tt.descriptor_reduce add, %desc[%i, %j], %src : desc_type, src_type``."""
    kind = cur.expect_word(list(ENUMS["reduce_kind"]))
    cur.expect_punct(",")
    p = Parsed(operands=_desc_index_src(cur), attrs={"kind": kind})
    _trailing(cur, p)
    cur.type_list()
    cur.done()
    return p


@_reader("dot")
def _dot(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    while cur.accept_punct(","):
        key = cur.expect_word()
        cur.expect_punct("=")
        if key == "inputPrecision":
            p.attrs[key] = cur.expect_word(list(ENUMS["precision"]))
        else:
            p.attrs[key] = IntAttr(cur.expect_int(), i32)
    _trailing(cur, p)
    cur.expect_type()
    cur.expect_punct("*")
    cur.expect_type()
    cur.expect_punct("->")
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("dot_scaled")
def _dot_scaled(cur: Cursor, spec: OpSpec) -> Parsed:
    a = cur.expect_value()
    a_scale = cur.expect_value() if cur.accept_word("scale") else None
    cur.expect_punct(",")
    b = cur.expect_value()
    b_scale = cur.expect_value() if cur.accept_word("scale") else None
    cur.expect_punct(",")
    c = cur.expect_value()
    p = Parsed(operands=[a, b, c] + [s for s in (a_scale, b_scale) if s is not None])
    p.attrs["operandSegmentSizes"] = DenseArray([1, 1, 1, int(a_scale is not None), int(b_scale is not None)])
    cur.expect_word(["lhs"])
    cur.expect_punct("=")
    p.attrs["a_elem_type"] = cur.expect_word(list(ENUMS["scale_elem"]))
    cur.expect_word(["rhs"])
    cur.expect_punct("=")
    p.attrs["b_elem_type"] = cur.expect_word(list(ENUMS["scale_elem"]))
    _trailing(cur, p)
    while not cur.is_punct("->"):
        if cur.at_end():
            raise cur.fail("'->'")
        cur.pos += 1
    cur.expect_punct("->")
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("return_like")
def _return_like(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed()
    cur.accept_attr_dict(p.attrs)
    p.operands = cur.typed_value_list()
    cur.done()
    p.result_types = []
    return p


@_reader("clampf")
def _clampf(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    cur.expect_punct(",")
    cur.expect_word(["propagateNan"])
    cur.expect_punct("=")
    p.attrs["propagateNan"] = cur.expect_word(list(ENUMS["propagate_nan"]))
    _trailing(cur, p)
    p.result_types = [cur.expect_type()]
    cur.done()
    return p


@_reader("print")
def _print(cur: Cursor, spec: OpSpec) -> Parsed:
    prefix = cur.next("string", "the print prefix string")
    p = Parsed(attrs={"prefix": prefix.value})
    cur.accept_attr_dict(p.attrs)
    if cur.accept_punct(":"):
        p.operands = cur.value_list()
        cur.expect_punct(":")
        cur.type_list()
    cur.done()
    return p


@_reader("assert")
def _assert(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    cur.expect_punct(",")
    p.attrs["message"] = cur.next("string", "the assert message").value
    _trailing(cur, p)
    cur.expect_type()
    cur.done()
    return p


@_reader("inline_asm")
def _inline_asm(cur: Cursor, spec: OpSpec) -> Parsed:
    """``tt.elementwise_inline_asm "asm" {attrs} %args : T, T -> R, R``."""
    p = Parsed(attrs={"asm_string": cur.next("string", "the asm string").value})
    cur.accept_attr_dict(p.attrs)
    p.operands = cur.typed_value_list()
    cur.expect_punct("->")
    p.result_types = cur.type_list()
    cur.done()
    return p


@_reader("bare")
def _bare(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed()
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


@_reader("math_fpowi")
def _math_fpowi(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=cur.value_list())
    _modifiers(cur, p)
    _trailing(cur, p)
    t = cur.expect_type()
    cur.expect_punct(",")
    cur.expect_type()
    p.result_types = [t]
    cur.done()
    return p


@_reader("math_predicate")
def _math_predicate(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    _modifiers(cur, p)
    _trailing(cur, p)
    t = cur.expect_type()
    p.result_types = [with_element_type(t, i1)]
    cur.done()
    return p


# ---------------------------------------------------------------------------------------- scf / cf
def _with_yield(region: Region) -> Region:
    """Add the implicit ``scf.yield`` MLIR leaves out of printed scf.for/scf.if bodies with no results."""
    for block in region.blocks:
        last = block.terminator
        if last is None or last.name not in ("scf.yield", "tt.return", "cf.br", "cf.cond_br"):
            loc = last.location if last is not None else UNKNOWN_LOC
            block.append(Operation("scf.yield", location=loc))
    return region


def _assignments(cur: Cursor) -> tuple[list[str], list[Value]]:
    """``(%a = %x, %b = %y)`` → names and values."""
    cur.expect_punct("(")
    names: list[str] = []
    vals: list[Value] = []
    while not cur.accept_punct(")"):
        names.append(cur.next("value", "a block argument (%name)").value)
        cur.expect_punct("=")
        vals.append(cur.expect_value())
        if not cur.is_punct(")"):
            cur.expect_punct(",")
    return names, vals


@_reader("scf_for")
def _scf_for(cur: Cursor, spec: OpSpec) -> Parsed:
    iv = cur.next("value", "the induction variable").value
    cur.expect_punct("=")
    lb = cur.expect_value()
    cur.expect_word(["to"])
    ub = cur.expect_value()
    cur.expect_word(["step"])
    step = cur.expect_value()
    p = Parsed(operands=[lb, ub, step])
    names: list[str] = [iv]
    inits: list[Value] = []
    if cur.accept_word("iter_args"):
        n, inits = _assignments(cur)
        names += n
        cur.expect_punct("->")
        p.result_types = cur.paren_type_list()
    p.operands += inits
    iv_type = lb.type
    if cur.accept_punct(":"):
        iv_type = cur.expect_type()
    if cur.accept_word("attributes"):
        cur.accept_attr_dict(p.attrs)
    p.regions = [_with_yield(cur.expect_region(names, [iv_type] + [v.type for v in inits]))]
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


@_reader("scf_if")
def _scf_if(cur: Cursor, spec: OpSpec) -> Parsed:
    p = Parsed(operands=[cur.expect_value()])
    if cur.accept_punct("->"):
        p.result_types = cur.paren_type_list()
    p.regions = [_with_yield(cur.expect_region())]
    if cur.accept_word("else"):
        p.regions.append(_with_yield(cur.expect_region()))
    else:
        p.regions.append(Region())
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


@_reader("scf_while")
def _scf_while(cur: Cursor, spec: OpSpec) -> Parsed:
    names, inits = _assignments(cur)
    cur.expect_punct(":")
    arg_types = cur.paren_type_list()
    cur.expect_punct("->")
    p = Parsed(operands=inits, result_types=cur.paren_type_list())
    if cur.accept_word("attributes"):
        cur.accept_attr_dict(p.attrs)
    before = cur.expect_region(names, arg_types)
    cur.expect_word(["do"])
    after = cur.expect_region()
    p.regions = [before, after]
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


@_reader("scf_condition")
def _scf_condition(cur: Cursor, spec: OpSpec) -> Parsed:
    cur.expect_punct("(")
    cond = cur.expect_value()
    cur.expect_punct(")")
    p = Parsed(operands=[cond])
    cur.accept_attr_dict(p.attrs)
    p.operands += cur.typed_value_list()
    cur.done()
    return p


def _successor(cur: Cursor) -> tuple[Block, list[Value]]:
    label = cur.next("block", "a block label (^bbN)").value
    vals: list[Value] = []
    if cur.accept_punct("("):
        vals = cur.value_list()
        cur.expect_punct(":")
        cur.type_list()
        cur.expect_punct(")")
    return cur.ctx.block_ref(label), vals


@_reader("cf_br")
def _cf_br(cur: Cursor, spec: OpSpec) -> Parsed:
    block, vals = _successor(cur)
    p = Parsed(operands=vals, successors=[block])
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


@_reader("cf_cond_br")
def _cf_cond_br(cur: Cursor, spec: OpSpec) -> Parsed:
    cond = cur.expect_value()
    cur.expect_punct(",")
    t_block, t_vals = _successor(cur)
    cur.expect_punct(",")
    f_block, f_vals = _successor(cur)
    p = Parsed(operands=[cond, *t_vals, *f_vals], successors=[t_block, f_block])
    p.attrs["operandSegmentSizes"] = DenseArray([1, len(t_vals), len(f_vals)])
    cur.accept_attr_dict(p.attrs)
    cur.done()
    return p


def is_descriptor(t: Type) -> bool:
    return isinstance(t, TensorDescType)
