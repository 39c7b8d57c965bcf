"""The custom (pretty) textual forms of the tile-IR ops, as Triton prints them: one writer per
syntax name of the op registry (`lowering.ir.registry`), used by `lowering.ir.printer.Printer`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lowering.ir.attr_format import dense_body, format_attr, format_attr_dict, format_float, quote
from lowering.ir.attributes import (
    DenseAttr,
    IntAttr,
    UnitAttr,
)
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import Location
from lowering.ir.registry import ENUMS, OP_SPECS, named_operands, registrar
from lowering.ir.types import FloatType, IntType, Type, i32


class Printer(Protocol):
    """What a writer uses of `lowering.ir.printer.Printer` (SSA names, lines, nested regions)."""

    def define(self, v: Value) -> str: ...

    def define_results(self, op: Operation) -> str: ...

    def ref(self, v: Value) -> str: ...

    def refs(self, vs: Sequence[Value]) -> str: ...

    def typed_refs(self, vs: Sequence[Value]) -> str: ...

    def block_name(self, b: Block) -> str: ...

    def loc(self, loc: Location) -> str: ...

    def emit(self, depth: int, text: str) -> None: ...

    def simple(self, op: Operation, depth: int, body: str) -> None: ...

    def with_regions(
        self, op: Operation, depth: int, head: str, parts: list[tuple[str, Region, bool]], tail: str = ""
    ) -> None: ...

_ENUM_INT_TYPE = {"cmpi": IntType(64), "cmpf": IntType(64)}


def _enum_as_int(enum: str | None, v: Any) -> Any:
    if enum and isinstance(v, str) and v in ENUMS[enum]:
        return IntAttr(ENUMS[enum][v], _ENUM_INT_TYPE.get(enum, i32))
    return v


Writer = Callable[["Printer", Operation, int], None]
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
        body = f"dense<{dense_body(v)}> : {v.type}"
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
