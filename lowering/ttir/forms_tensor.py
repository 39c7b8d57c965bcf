"""Readers of the custom forms of block pointers, tensor descriptors, dots, debug ops and structured
control flow; registered in `lowering.ttir.custom_forms.READERS`."""

from __future__ import annotations

from lowering.ir.attributes import DenseArray, IntAttr
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import UNKNOWN_LOC
from lowering.ir.registry import ENUMS, OpSpec
from lowering.ir.types import (
    PointerType,
    TensorDescType,
    TensorType,
    Type,
    i1,
    i32,
    with_element_type,
)
from lowering.ttir.custom_forms import (
    Cursor,
    Parsed,
    _reader,
    _trailing,
)
from lowering.ttir.forms_scalar import _mem_keywords, _modifiers


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
