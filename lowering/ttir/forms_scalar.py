"""Readers of the custom forms of scalar and elementwise ops (constants, arith, casts, loads and
stores, atomics, calls); registered in `lowering.ttir.custom_forms.READERS`."""

from __future__ import annotations

from typing import Any

from lowering.ir.attributes import UNIT, DenseAttr, FloatAttr, IntAttr
from lowering.ir.registry import ENUMS, OpSpec
from lowering.ir.types import (
    FloatType,
    IntType,
    PointerType,
    TensorType,
    Type,
    i1,
    i32,
    with_element_type,
    with_shape,
)
from lowering.ttir.custom_forms import (
    Cursor,
    Parsed,
    _reader,
    _trailing,
)
from lowering.ttir.raw import Item


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
    from lowering.ttir.raw_attrs import _float_from_hex

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
