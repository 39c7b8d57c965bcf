"""Per-op type rules of the tile-IR verifier: one rule per `type_rule` name of the op registry
(`lowering.ir.registry`); a rule raises `RuleViolation` with the reason."""

from __future__ import annotations

from collections.abc import Callable

from lowering.ir.attributes import DenseAttr
from lowering.ir.core import Block, Operation, Region
from lowering.ir.registry import ENUMS, registrar
from lowering.ir.types import (
    FloatType,
    IndexType,
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

__all__ = ["TYPE_RULES", "RuleViolation", "need"]


class RuleViolation(Exception):
    """An op breaks its type rule (the message is the reason)."""


def need(cond: bool, msg: str) -> None:
    if not cond:
        raise RuleViolation(msg)


Rule = Callable[[Operation], None]
TYPE_RULES: dict[str, Rule] = {}


_rule = registrar(TYPE_RULES)


def _same_shape(a: Type, b: Type) -> bool:
    return a.shape == b.shape


@_rule("constant")
def _constant(op: Operation) -> None:
    v = op.attributes["value"]
    t = op.result.type
    if isinstance(v, DenseAttr):
        need(v.type == t, f"dense value type {v.type} differs from result type {t}")
    elif isinstance(v, bool):
        need(t == i1, f"boolean constant must have type i1, not {t}")
    elif isinstance(v, float):
        need(isinstance(t, FloatType), f"float constant with non-float type {t}")
    elif isinstance(v, int):
        need(isinstance(t, IntType | IndexType), f"integer constant with non-integer type {t}")


def _all_same(op: Operation) -> None:
    t = op.result.type
    for i, v in enumerate(op.operands):
        need(v.type == t, f"operand #{i} has type {v.type}, result has {t} (they must match)")


@_rule("same_type_int")
def _same_type_int(op: Operation) -> None:
    _all_same(op)
    need(
        isinstance(op.result.type.element_type, IntType | IndexType),
        f"needs integer operands, got {op.result.type}",
    )


@_rule("same_type_float")
def _same_type_float(op: Operation) -> None:
    _all_same(op)
    need(op.result.type.is_float, f"needs float operands, got {op.result.type}")


@_rule("same_shape")
def _same_shape_rule(op: Operation) -> None:
    for v in op.operands:
        need(
            v.type.shape == op.results[0].type.shape,
            f"operand shape {list(v.type.shape)} differs from result shape {list(op.results[0].type.shape)}",
        )


@_rule("cmp")
def _cmp(op: Operation) -> None:
    a, b = op.operands
    need(a.type == b.type, f"compared operands differ: {a.type} vs {b.type}")
    need(op.result.type == with_element_type(a.type, i1), f"result must be i1 of shape {list(a.type.shape)}")
    pred = op.attributes["predicate"]
    table = "cmpi" if op.name == "arith.cmpi" else "cmpf"
    need(pred in ENUMS[table], f"unknown predicate {pred!r}")


@_rule("select")
def _select(op: Operation) -> None:
    c, a, b = op.operands
    need(a.type == b.type == op.result.type, f"select arms {a.type}, {b.type} and result must match")
    need(c.type.element_type == i1, f"condition must be i1, got {c.type}")
    need(not c.type.shape or c.type.shape == a.type.shape, "condition shape must be scalar or match the arms")


@_rule("cast_same_shape")
def _cast_same_shape(op: Operation) -> None:
    need(
        op.operands[0].type.shape == op.result.type.shape,
        f"conversion changes the shape: {op.operands[0].type} -> {op.result.type}",
    )


@_rule("scalar_i32")
def _scalar_i32(op: Operation) -> None:
    need(op.result.type == i32, f"result must be i32, got {op.result.type}")
    need(op.attributes["axis"] in (0, 1, 2), "axis must be 0, 1 or 2 (x, y, z)")


@_rule("make_range")
def _make_range(op: Operation) -> None:
    t = op.result.type
    start, end = int(op.attributes["start"]), int(op.attributes["end"])
    need(
        isinstance(t, TensorType) and t.rank == 1 and t.element == i32,
        f"result must be tensor<Nxi32>, got {t}",
    )
    need(end > start and t.shape[0] == end - start, f"range [{start}, {end}) does not match {t}")


@_rule("splat")
def _splat(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    need(not src.shape, f"splat source must be a scalar, got {src}")
    need(t.element_type == src, f"splat result element {t.element_type} differs from source {src}")


@_rule("unsplat")
def _unsplat(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    need(src.numel == 1 and t == src.element_type, f"unsplat needs a one-element tensor, got {src} -> {t}")


@_rule("broadcast")
def _broadcast(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    need(src.element_type == t.element_type, "broadcast changes the element type")
    need(src.rank == t.rank, f"broadcast keeps the rank: {src} -> {t}")
    for s, d in zip(src.shape, t.shape, strict=True):
        need(s == d or s == 1, f"cannot broadcast {list(src.shape)} to {list(t.shape)}")


@_rule("expand_dims")
def _expand_dims(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    axis = int(op.attributes["axis"])
    shape = list(src.shape)
    need(0 <= axis <= len(shape), f"axis {axis} out of range for rank {len(shape)}")
    shape.insert(axis, 1)
    need(t == with_shape(src.element_type, tuple(shape)), f"expand_dims axis {axis} of {src} gives {t}")


@_rule("reshape")
def _reshape(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    need(
        src.numel == t.numel and src.element_type == t.element_type, f"reshape {src} -> {t} changes size/type"
    )


@_rule("trans")
def _trans(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    order = [int(x) for x in op.attributes["order"]]
    need(sorted(order) == list(range(src.rank)), f"order {order} is not a permutation of rank {src.rank}")
    need(
        t.shape == tuple(src.shape[i] for i in order) and t.element_type == src.element_type,
        f"trans {order} of {src} gives {t}",
    )


@_rule("join")
def _join(op: Operation) -> None:
    a, b = op.operands
    need(a.type == b.type, "join operands differ")
    need(
        op.result.type == with_shape(a.type.element_type, (*a.type.shape, 2)),
        f"join of {a.type} gives {op.result.type}",
    )


@_rule("split")
def _split(op: Operation) -> None:
    src = op.operands[0].type
    need(bool(src.shape) and src.shape[-1] == 2, f"split needs a last dimension of 2, got {src}")
    for r in op.results:
        need(r.type == with_shape(src.element_type, src.shape[:-1]), f"split of {src} gives {r.type}")


@_rule("cat")
def _cat(op: Operation) -> None:
    a, b = op.operands
    need(a.type == b.type, "cat operands differ")
    need(op.result.type.numel == 2 * a.type.numel, f"cat of two {a.type} gives {op.result.type}")


@_rule("histogram")
def _histogram(op: Operation) -> None:
    need(
        op.operands[0].type.is_int and op.result.type.is_int and op.result.type.rank == 1,
        "histogram takes integer values and gives a 1-D integer tensor",
    )


@_rule("gather")
def _gather(op: Operation) -> None:
    src, idx = op.operands
    need(
        op.result.type == with_shape(src.type.element_type, idx.type.shape),
        f"gather result must have the indices' shape {list(idx.type.shape)} and source element type",
    )
    need(idx.type.is_int, "gather indices must be integers")


@_rule("addptr")
def _addptr(op: Operation) -> None:
    ptr, off = op.operands
    need(ptr.type.is_pointer, f"first operand must be a pointer, got {ptr.type}")
    need(off.type.is_int, f"offset must be an integer, got {off.type}")
    need(ptr.type.shape == off.type.shape, f"pointer {ptr.type} and offset {off.type} shapes differ")
    need(op.result.type == ptr.type, "result type must equal the pointer type")


def _loaded(ptr: Type) -> Type:
    elem = ptr.element_type
    assert isinstance(elem, PointerType)
    return elem.pointee if isinstance(elem.pointee, TensorType) else with_shape(elem.pointee, ptr.shape)


@_rule("load")
def _load(op: Operation) -> None:
    ptr = op.operands[0]
    need(ptr.type.is_pointer, f"load needs a pointer, got {ptr.type}")
    want = _loaded(ptr.type)
    need(op.result.type == want, f"load of {ptr.type} must give {want}, got {op.result.type}")
    if len(op.operands) > 1:
        need(
            op.operands[1].type == with_element_type(want, i1), f"mask must be i1 of shape {list(want.shape)}"
        )
    if len(op.operands) > 2:
        need(op.operands[2].type == want, f"other must have type {want}")


@_rule("store")
def _store(op: Operation) -> None:
    ptr, val = op.operands[0], op.operands[1]
    need(ptr.type.is_pointer, f"store needs a pointer, got {ptr.type}")
    want = _loaded(ptr.type)
    need(val.type == want, f"stored value must have type {want}, got {val.type}")
    if len(op.operands) > 2:
        need(
            op.operands[2].type == with_element_type(want, i1), f"mask must be i1 of shape {list(want.shape)}"
        )


@_rule("atomic")
def _atomic(op: Operation) -> None:
    ptr = op.operands[0]
    need(ptr.type.is_pointer, f"atomic needs a pointer, got {ptr.type}")
    need(op.result.type == _loaded(ptr.type), f"atomic result must be {_loaded(ptr.type)}")


@_rule("make_tensor_ptr")
def _make_tensor_ptr(op: Operation) -> None:
    t = op.result.type
    need(
        isinstance(t, PointerType) and isinstance(t.pointee, TensorType),
        f"result must be a block pointer, got {t}",
    )
    rank = (len(op.operands) - 1) // 3
    need(len(op.operands) == 1 + 3 * rank, "shape, strides and offsets must have the same length")
    need(len(op.attributes["order"]) == rank, "order must have one entry per dimension")


@_rule("same_result_as_first")
def _same_result_as_first(op: Operation) -> None:
    need(op.result.type == op.operands[0].type, "result type must equal the first operand's type")


@_rule("descriptor_access")
def _descriptor_access(op: Operation) -> None:
    desc = op.operands[0].type
    need(isinstance(desc, TensorDescType), f"first operand must be a !tt.tensordesc, got {desc}")
    assert isinstance(desc, TensorDescType)
    data = op.result.type if op.results else op.operands[1].type
    n_idx = len(op.operands) - (1 if op.results else 2)
    need(n_idx == desc.block.rank, f"needs {desc.block.rank} indices, has {n_idx}")
    need(
        data.element_type == desc.block.element and data.numel == desc.block.numel,
        f"tile {data} does not match the descriptor block {desc.block}",
    )


@_rule("make_tensor_descriptor")
def _make_tensor_descriptor(op: Operation) -> None:
    t = op.result.type
    need(isinstance(t, TensorDescType), f"result must be a !tt.tensordesc, got {t}")
    assert isinstance(t, TensorDescType)
    need(len(op.operands) == 1 + 2 * t.block.rank, "shape and strides need one entry per block dimension")
    need(op.operands[0].type == PointerType(t.block.element), "base pointer element must match the block's")


@_rule("dot")
def _dot(op: Operation) -> None:
    a, b, c = (v.type for v in op.operands)
    need(
        a.rank in (2, 3) and a.rank == b.rank == c.rank,
        f"dot needs 2-D (or batched 3-D) tensors: {a}, {b}, {c}",
    )
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    need(k == k2, f"dot inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    need(
        c.shape[-2:] == (m, n) and a.shape[:-2] == b.shape[:-2] == c.shape[:-2],
        f"accumulator shape {list(c.shape)} does not match {list(a.shape)} x {list(b.shape)}",
    )
    need(op.result.type == c, f"dot result {op.result.type} must equal the accumulator type {c}")


@_rule("dot_scaled")
def _dot_scaled(op: Operation) -> None:
    need(op.result.type == op.operands[2].type, "dot_scaled result must equal the accumulator type")


def _combiner(op: Operation, n: int, what: str) -> Block:
    need(len(op.regions) == 1 and len(op.regions[0].blocks) == 1, f"{what} needs one combiner block")
    block = op.regions[0].entry
    need(len(block.args) == 2 * n, f"{what} combiner needs {2 * n} arguments, has {len(block.args)}")
    term = block.terminator
    need(
        term is not None and term.name == f"{op.name}.return", f"{what} combiner must end in {op.name}.return"
    )
    assert term is not None
    need(len(term.operands) == n, f"{what} combiner must return {n} values")
    for i, v in enumerate(op.operands):
        need(
            block.args[i].type == v.type.element_type, f"combiner argument #{i} must be {v.type.element_type}"
        )
    return block


@_rule("reduce")
def _reduce(op: Operation) -> None:
    n = len(op.operands)
    need(n >= 1 and len(op.results) == n, "reduce has one result per operand")
    _combiner(op, n, "reduce")
    axis = int(op.attributes["axis"])
    for v, r in zip(op.operands, op.results, strict=True):
        shape = list(v.type.shape)
        need(0 <= axis < len(shape), f"axis {axis} out of range for {v.type}")
        del shape[axis]
        need(
            r.type == with_shape(v.type.element_type, tuple(shape)),
            f"reduce of {v.type} on axis {axis} gives {r.type}",
        )


@_rule("scan")
def _scan(op: Operation) -> None:
    n = len(op.operands)
    need(n >= 1 and len(op.results) == n, "scan has one result per operand")
    _combiner(op, n, "scan")
    for v, r in zip(op.operands, op.results, strict=True):
        need(r.type == v.type, f"scan result {r.type} must equal its operand {v.type}")


def _yield_types(region: Region, terminator: str) -> list[Type] | None:
    if not region.blocks:
        return None
    term = region.blocks[-1].terminator
    need(term is not None and term.name == terminator, f"region must end in {terminator}")
    assert term is not None
    return term.operand_types


@_rule("scf_for")
def _scf_for(op: Operation) -> None:
    lb, ub, step, *inits = op.operands
    need(lb.type == ub.type == step.type, "for bounds and step must have one type")
    body = op.regions[0].entry
    need(len(body.args) == 1 + len(inits), "for body needs the induction variable and one arg per iter_arg")
    need(
        [a.type for a in body.args[1:]] == [v.type for v in inits] == op.result_types,
        "iter_args, body arguments and results must have the same types",
    )
    need(
        _yield_types(op.regions[0], "scf.yield") == op.result_types, "scf.yield types must match the results"
    )


@_rule("scf_if")
def _scf_if(op: Operation) -> None:
    need(op.operands[0].type == i1, "scf.if condition must be i1")
    if op.results:
        need(bool(op.regions[1].blocks), "scf.if with results needs an else region")
    for r in op.regions:
        if r.blocks:
            got = _yield_types(r, "scf.yield")
            need(got == op.result_types, f"scf.if branch yields {got}, results are {op.result_types}")


@_rule("scf_while")
def _scf_while(op: Operation) -> None:
    before, after = op.regions
    need(
        [a.type for a in before.entry.args] == op.operand_types,
        "before-region arguments must match the inits",
    )
    term = before.blocks[-1].terminator
    need(term is not None and term.name == "scf.condition", "before-region must end in scf.condition")
    assert term is not None
    need(term.operand_types[1:] == op.result_types, "scf.condition values must match the results")
    need(
        [a.type for a in after.entry.args] == op.result_types, "after-region arguments must match the results"
    )
    need(_yield_types(after, "scf.yield") == op.operand_types, "after-region must yield the inits' types")


# ------------------------------------------------------------------------------------------ driver
