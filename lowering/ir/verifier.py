"""The tile-IR verifier: structure (SSA visibility, arity, attributes, terminators) and per-op type rules.

``verify(module)`` raises `VerifierError` at the first problem, naming the op, its kernel source
location and what is wrong. ``verify_errors(module)`` returns all problems as strings.
"""

from __future__ import annotations

from collections.abc import Callable

from lowering.ir.attributes import DenseAttr, UnitAttr
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.module import Function, Module
from lowering.ir.registry import ENUMS, OP_SPECS, OpSpec, registrar
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

__all__ = ["VerifierError", "verify", "verify_errors", "TYPE_RULES"]


class VerifierError(Exception):
    """The IR breaks a rule: `op_name`, `location` (kernel source position) and the `reason`."""

    def __init__(self, reason: str, op: Operation | None = None, function: str | None = None) -> None:
        self.reason = reason
        self.op_name = op.name if op is not None else None
        self.location = op.location if op is not None else None
        where = ""
        if op is not None:
            where = f"'{op.name}' at {op.location.source_position()}"
            if function:
                where += f" in @{function}"
            where += ": "
        elif function:
            where = f"@{function}: "
        super().__init__(where + reason)


class _Problem(Exception):
    pass


def _req(cond: bool, msg: str) -> None:
    if not cond:
        raise _Problem(msg)


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
        _req(v.type == t, f"dense value type {v.type} differs from result type {t}")
    elif isinstance(v, bool):
        _req(t == i1, f"boolean constant must have type i1, not {t}")
    elif isinstance(v, float):
        _req(isinstance(t, FloatType), f"float constant with non-float type {t}")
    elif isinstance(v, int):
        _req(isinstance(t, IntType | IndexType), f"integer constant with non-integer type {t}")


def _all_same(op: Operation) -> None:
    t = op.result.type
    for i, v in enumerate(op.operands):
        _req(v.type == t, f"operand #{i} has type {v.type}, result has {t} (they must match)")


@_rule("same_type_int")
def _same_type_int(op: Operation) -> None:
    _all_same(op)
    _req(
        isinstance(op.result.type.element_type, IntType | IndexType),
        f"needs integer operands, got {op.result.type}",
    )


@_rule("same_type_float")
def _same_type_float(op: Operation) -> None:
    _all_same(op)
    _req(op.result.type.is_float, f"needs float operands, got {op.result.type}")


@_rule("same_shape")
def _same_shape_rule(op: Operation) -> None:
    for v in op.operands:
        _req(
            v.type.shape == op.results[0].type.shape,
            f"operand shape {list(v.type.shape)} differs from result shape {list(op.results[0].type.shape)}",
        )


@_rule("cmp")
def _cmp(op: Operation) -> None:
    a, b = op.operands
    _req(a.type == b.type, f"compared operands differ: {a.type} vs {b.type}")
    _req(op.result.type == with_element_type(a.type, i1), f"result must be i1 of shape {list(a.type.shape)}")
    pred = op.attributes["predicate"]
    table = "cmpi" if op.name == "arith.cmpi" else "cmpf"
    _req(pred in ENUMS[table], f"unknown predicate {pred!r}")


@_rule("select")
def _select(op: Operation) -> None:
    c, a, b = op.operands
    _req(a.type == b.type == op.result.type, f"select arms {a.type}, {b.type} and result must match")
    _req(c.type.element_type == i1, f"condition must be i1, got {c.type}")
    _req(not c.type.shape or c.type.shape == a.type.shape, "condition shape must be scalar or match the arms")


@_rule("cast_same_shape")
def _cast_same_shape(op: Operation) -> None:
    _req(
        op.operands[0].type.shape == op.result.type.shape,
        f"conversion changes the shape: {op.operands[0].type} -> {op.result.type}",
    )


@_rule("scalar_i32")
def _scalar_i32(op: Operation) -> None:
    _req(op.result.type == i32, f"result must be i32, got {op.result.type}")
    _req(op.attributes["axis"] in (0, 1, 2), "axis must be 0, 1 or 2 (x, y, z)")


@_rule("make_range")
def _make_range(op: Operation) -> None:
    t = op.result.type
    start, end = int(op.attributes["start"]), int(op.attributes["end"])
    _req(
        isinstance(t, TensorType) and t.rank == 1 and t.element == i32,
        f"result must be tensor<Nxi32>, got {t}",
    )
    _req(end > start and t.shape[0] == end - start, f"range [{start}, {end}) does not match {t}")


@_rule("splat")
def _splat(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    _req(not src.shape, f"splat source must be a scalar, got {src}")
    _req(t.element_type == src, f"splat result element {t.element_type} differs from source {src}")


@_rule("unsplat")
def _unsplat(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    _req(src.numel == 1 and t == src.element_type, f"unsplat needs a one-element tensor, got {src} -> {t}")


@_rule("broadcast")
def _broadcast(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    _req(src.element_type == t.element_type, "broadcast changes the element type")
    _req(src.rank == t.rank, f"broadcast keeps the rank: {src} -> {t}")
    for s, d in zip(src.shape, t.shape, strict=True):
        _req(s == d or s == 1, f"cannot broadcast {list(src.shape)} to {list(t.shape)}")


@_rule("expand_dims")
def _expand_dims(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    axis = int(op.attributes["axis"])
    shape = list(src.shape)
    _req(0 <= axis <= len(shape), f"axis {axis} out of range for rank {len(shape)}")
    shape.insert(axis, 1)
    _req(t == with_shape(src.element_type, tuple(shape)), f"expand_dims axis {axis} of {src} gives {t}")


@_rule("reshape")
def _reshape(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    _req(
        src.numel == t.numel and src.element_type == t.element_type, f"reshape {src} -> {t} changes size/type"
    )


@_rule("trans")
def _trans(op: Operation) -> None:
    src, t = op.operands[0].type, op.result.type
    order = [int(x) for x in op.attributes["order"]]
    _req(sorted(order) == list(range(src.rank)), f"order {order} is not a permutation of rank {src.rank}")
    _req(
        t.shape == tuple(src.shape[i] for i in order) and t.element_type == src.element_type,
        f"trans {order} of {src} gives {t}",
    )


@_rule("join")
def _join(op: Operation) -> None:
    a, b = op.operands
    _req(a.type == b.type, "join operands differ")
    _req(
        op.result.type == with_shape(a.type.element_type, (*a.type.shape, 2)),
        f"join of {a.type} gives {op.result.type}",
    )


@_rule("split")
def _split(op: Operation) -> None:
    src = op.operands[0].type
    _req(bool(src.shape) and src.shape[-1] == 2, f"split needs a last dimension of 2, got {src}")
    for r in op.results:
        _req(r.type == with_shape(src.element_type, src.shape[:-1]), f"split of {src} gives {r.type}")


@_rule("cat")
def _cat(op: Operation) -> None:
    a, b = op.operands
    _req(a.type == b.type, "cat operands differ")
    _req(op.result.type.numel == 2 * a.type.numel, f"cat of two {a.type} gives {op.result.type}")


@_rule("histogram")
def _histogram(op: Operation) -> None:
    _req(
        op.operands[0].type.is_int and op.result.type.is_int and op.result.type.rank == 1,
        "histogram takes integer values and gives a 1-D integer tensor",
    )


@_rule("gather")
def _gather(op: Operation) -> None:
    src, idx = op.operands
    _req(
        op.result.type == with_shape(src.type.element_type, idx.type.shape),
        f"gather result must have the indices' shape {list(idx.type.shape)} and source element type",
    )
    _req(idx.type.is_int, "gather indices must be integers")


@_rule("addptr")
def _addptr(op: Operation) -> None:
    ptr, off = op.operands
    _req(ptr.type.is_pointer, f"first operand must be a pointer, got {ptr.type}")
    _req(off.type.is_int, f"offset must be an integer, got {off.type}")
    _req(ptr.type.shape == off.type.shape, f"pointer {ptr.type} and offset {off.type} shapes differ")
    _req(op.result.type == ptr.type, "result type must equal the pointer type")


def _loaded(ptr: Type) -> Type:
    elem = ptr.element_type
    assert isinstance(elem, PointerType)
    return elem.pointee if isinstance(elem.pointee, TensorType) else with_shape(elem.pointee, ptr.shape)


@_rule("load")
def _load(op: Operation) -> None:
    ptr = op.operands[0]
    _req(ptr.type.is_pointer, f"load needs a pointer, got {ptr.type}")
    want = _loaded(ptr.type)
    _req(op.result.type == want, f"load of {ptr.type} must give {want}, got {op.result.type}")
    if len(op.operands) > 1:
        _req(
            op.operands[1].type == with_element_type(want, i1), f"mask must be i1 of shape {list(want.shape)}"
        )
    if len(op.operands) > 2:
        _req(op.operands[2].type == want, f"other must have type {want}")


@_rule("store")
def _store(op: Operation) -> None:
    ptr, val = op.operands[0], op.operands[1]
    _req(ptr.type.is_pointer, f"store needs a pointer, got {ptr.type}")
    want = _loaded(ptr.type)
    _req(val.type == want, f"stored value must have type {want}, got {val.type}")
    if len(op.operands) > 2:
        _req(
            op.operands[2].type == with_element_type(want, i1), f"mask must be i1 of shape {list(want.shape)}"
        )


@_rule("atomic")
def _atomic(op: Operation) -> None:
    ptr = op.operands[0]
    _req(ptr.type.is_pointer, f"atomic needs a pointer, got {ptr.type}")
    _req(op.result.type == _loaded(ptr.type), f"atomic result must be {_loaded(ptr.type)}")


@_rule("make_tensor_ptr")
def _make_tensor_ptr(op: Operation) -> None:
    t = op.result.type
    _req(
        isinstance(t, PointerType) and isinstance(t.pointee, TensorType),
        f"result must be a block pointer, got {t}",
    )
    rank = (len(op.operands) - 1) // 3
    _req(len(op.operands) == 1 + 3 * rank, "shape, strides and offsets must have the same length")
    _req(len(op.attributes["order"]) == rank, "order must have one entry per dimension")


@_rule("same_result_as_first")
def _same_result_as_first(op: Operation) -> None:
    _req(op.result.type == op.operands[0].type, "result type must equal the first operand's type")


@_rule("descriptor_access")
def _descriptor_access(op: Operation) -> None:
    desc = op.operands[0].type
    _req(isinstance(desc, TensorDescType), f"first operand must be a !tt.tensordesc, got {desc}")
    assert isinstance(desc, TensorDescType)
    data = op.result.type if op.results else op.operands[1].type
    n_idx = len(op.operands) - (1 if op.results else 2)
    _req(n_idx == desc.block.rank, f"needs {desc.block.rank} indices, has {n_idx}")
    _req(
        data.element_type == desc.block.element and data.numel == desc.block.numel,
        f"tile {data} does not match the descriptor block {desc.block}",
    )


@_rule("make_tensor_descriptor")
def _make_tensor_descriptor(op: Operation) -> None:
    t = op.result.type
    _req(isinstance(t, TensorDescType), f"result must be a !tt.tensordesc, got {t}")
    assert isinstance(t, TensorDescType)
    _req(len(op.operands) == 1 + 2 * t.block.rank, "shape and strides need one entry per block dimension")
    _req(op.operands[0].type == PointerType(t.block.element), "base pointer element must match the block's")


@_rule("dot")
def _dot(op: Operation) -> None:
    a, b, c = (v.type for v in op.operands)
    _req(
        a.rank in (2, 3) and a.rank == b.rank == c.rank,
        f"dot needs 2-D (or batched 3-D) tensors: {a}, {b}, {c}",
    )
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    _req(k == k2, f"dot inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    _req(
        c.shape[-2:] == (m, n) and a.shape[:-2] == b.shape[:-2] == c.shape[:-2],
        f"accumulator shape {list(c.shape)} does not match {list(a.shape)} x {list(b.shape)}",
    )
    _req(op.result.type == c, f"dot result {op.result.type} must equal the accumulator type {c}")


@_rule("dot_scaled")
def _dot_scaled(op: Operation) -> None:
    _req(op.result.type == op.operands[2].type, "dot_scaled result must equal the accumulator type")


def _combiner(op: Operation, n: int, what: str) -> Block:
    _req(len(op.regions) == 1 and len(op.regions[0].blocks) == 1, f"{what} needs one combiner block")
    block = op.regions[0].entry
    _req(len(block.args) == 2 * n, f"{what} combiner needs {2 * n} arguments, has {len(block.args)}")
    term = block.terminator
    _req(
        term is not None and term.name == f"{op.name}.return", f"{what} combiner must end in {op.name}.return"
    )
    assert term is not None
    _req(len(term.operands) == n, f"{what} combiner must return {n} values")
    for i, v in enumerate(op.operands):
        _req(
            block.args[i].type == v.type.element_type, f"combiner argument #{i} must be {v.type.element_type}"
        )
    return block


@_rule("reduce")
def _reduce(op: Operation) -> None:
    n = len(op.operands)
    _req(n >= 1 and len(op.results) == n, "reduce has one result per operand")
    _combiner(op, n, "reduce")
    axis = int(op.attributes["axis"])
    for v, r in zip(op.operands, op.results, strict=True):
        shape = list(v.type.shape)
        _req(0 <= axis < len(shape), f"axis {axis} out of range for {v.type}")
        del shape[axis]
        _req(
            r.type == with_shape(v.type.element_type, tuple(shape)),
            f"reduce of {v.type} on axis {axis} gives {r.type}",
        )


@_rule("scan")
def _scan(op: Operation) -> None:
    n = len(op.operands)
    _req(n >= 1 and len(op.results) == n, "scan has one result per operand")
    _combiner(op, n, "scan")
    for v, r in zip(op.operands, op.results, strict=True):
        _req(r.type == v.type, f"scan result {r.type} must equal its operand {v.type}")


def _yield_types(region: Region, terminator: str) -> list[Type] | None:
    if not region.blocks:
        return None
    term = region.blocks[-1].terminator
    _req(term is not None and term.name == terminator, f"region must end in {terminator}")
    assert term is not None
    return term.operand_types


@_rule("scf_for")
def _scf_for(op: Operation) -> None:
    lb, ub, step, *inits = op.operands
    _req(lb.type == ub.type == step.type, "for bounds and step must have one type")
    body = op.regions[0].entry
    _req(len(body.args) == 1 + len(inits), "for body needs the induction variable and one arg per iter_arg")
    _req(
        [a.type for a in body.args[1:]] == [v.type for v in inits] == op.result_types,
        "iter_args, body arguments and results must have the same types",
    )
    _req(
        _yield_types(op.regions[0], "scf.yield") == op.result_types, "scf.yield types must match the results"
    )


@_rule("scf_if")
def _scf_if(op: Operation) -> None:
    _req(op.operands[0].type == i1, "scf.if condition must be i1")
    if op.results:
        _req(bool(op.regions[1].blocks), "scf.if with results needs an else region")
    for r in op.regions:
        if r.blocks:
            got = _yield_types(r, "scf.yield")
            _req(got == op.result_types, f"scf.if branch yields {got}, results are {op.result_types}")


@_rule("scf_while")
def _scf_while(op: Operation) -> None:
    before, after = op.regions
    _req(
        [a.type for a in before.entry.args] == op.operand_types,
        "before-region arguments must match the inits",
    )
    term = before.blocks[-1].terminator
    _req(term is not None and term.name == "scf.condition", "before-region must end in scf.condition")
    assert term is not None
    _req(term.operand_types[1:] == op.result_types, "scf.condition values must match the results")
    _req(
        [a.type for a in after.entry.args] == op.result_types, "after-region arguments must match the results"
    )
    _req(_yield_types(after, "scf.yield") == op.operand_types, "after-region must yield the inits' types")


# ------------------------------------------------------------------------------------------ driver
class _Verifier:
    def __init__(self) -> None:
        self.errors: list[VerifierError] = []
        self.function: Function | None = None
        self.module: Module | None = None

    def fail(self, reason: str, op: Operation | None) -> None:
        self.errors.append(VerifierError(reason, op, self.function.name if self.function else None))

    def function_(self, f: Function, module: Module | None) -> None:
        self.function = f
        self.module = module
        if len(f.arg_attrs) != len(f.args):
            self.fail(f"has {len(f.args)} arguments but {len(f.arg_attrs)} argument attribute dicts", None)
        if f.is_declaration:
            return
        self.region(f.body, set(), is_function=True)

    def region(self, r: Region, visible: set[int], is_function: bool = False) -> None:
        # Values of a region's blocks: args of all blocks and results of all ops (CFG regions).
        # (In multi-block regions, a value of one block is taken as visible in the others: dominance is
        # not computed.)
        inner = set(visible)
        for b in r.blocks:
            inner.update(id(a) for a in b.args)
        defs = {id(b): {id(res) for op in b.ops for res in op.results} for b in r.blocks}
        all_defs = set().union(*defs.values()) if len(r.blocks) > 1 else set()
        for b in r.blocks:
            self.block(b, inner | (all_defs - defs[id(b)]), is_function)

    def block(self, b: Block, visible: set[int], is_function: bool) -> None:
        scope = set(visible)
        for i, op in enumerate(b.ops):
            self.op(op, scope)
            scope.update(id(res) for res in op.results)
            spec = OP_SPECS.get(op.name)
            if spec is not None and spec.terminator and i != len(b.ops) - 1:
                self.fail("terminator in the middle of a block", op)
        term = b.terminator
        if term is None:
            if is_function or b.parent is not None:
                self.fail("empty block (every block needs a terminator)", None)
            return
        spec = OP_SPECS.get(term.name)
        if spec is None or not spec.terminator:
            self.fail(f"block does not end in a terminator (last op is '{term.name}')", term)
        elif (
            is_function
            and term.name == "tt.return"
            and self.function is not None
            and b.parent is not None
            and len(b.parent.blocks) == 1
        ):
            if term.operand_types != self.function.result_types:
                self.fail(
                    f"returns {term.operand_types}, function declares {self.function.result_types}", term
                )

    def op(self, op: Operation, scope: set[int]) -> None:
        spec = OP_SPECS.get(op.name)
        if spec is None:
            self.fail("unknown op (not in lowering/ir/registry.py)", op)
            return
        for i, v in enumerate(op.operands):
            if id(v) not in scope:
                self.fail(f"operand #{i} ({_vname(v)}) is not defined before this use", op)
            if not any(u.op is op and u.index == i for u in v.uses):
                self.fail(f"operand #{i} is missing from its value's use list", op)
        try:
            self.arity(op, spec)
            self.attributes(op, spec)
            if spec.rule is not None:
                TYPE_RULES[spec.rule](op)
            if op.name == "tt.call":
                self.call(op)
        except _Problem as p:
            self.fail(str(p), op)
        except (KeyError, IndexError, AssertionError, TypeError, ValueError) as exc:
            self.fail(f"malformed op ({type(exc).__name__}: {exc})", op)
        for r in op.regions:
            self.region(r, scope)

    def arity(self, op: Operation, spec: OpSpec) -> None:
        n = len(op.operands)
        lo, hi = spec.min_operands, spec.max_operands
        _req(
            n >= lo and (hi is None or n <= hi),
            f"has {n} operands, expects {lo}" + ("" if hi == lo else f"..{hi if hi is not None else 'any'}"),
        )
        if spec.num_results is not None:
            _req(
                len(op.results) == spec.num_results,
                f"has {len(op.results)} results, expects {spec.num_results}",
            )
        _req(
            len(op.regions) == spec.num_regions, f"has {len(op.regions)} regions, expects {spec.num_regions}"
        )

    def attributes(self, op: Operation, spec: OpSpec) -> None:
        for name, a in spec.attrs.items():
            if name not in op.attributes:
                _req(not a.required, f"missing required attribute '{name}'")
                continue
            v = op.attributes[name]
            if a.kind == "enum" and a.enum and name != "axis":
                _req(
                    v in ENUMS[a.enum], f"attribute '{name}' = {v!r} is not one of {', '.join(ENUMS[a.enum])}"
                )
            elif a.kind == "int":
                _req(isinstance(v, int) and not isinstance(v, bool), f"attribute '{name}' must be an integer")
            elif a.kind == "bool":
                _req(isinstance(v, bool), f"attribute '{name}' must be a boolean")
            elif a.kind == "str":
                _req(isinstance(v, str), f"attribute '{name}' must be a string")
            elif a.kind == "unit":
                _req(isinstance(v, UnitAttr), f"attribute '{name}' must be a unit attribute")
            elif a.kind == "array":
                _req(isinstance(v, list), f"attribute '{name}' must be an array")

    def call(self, op: Operation) -> None:
        if self.module is None:
            return
        callee = op.attributes["callee"].name
        try:
            f = self.module.get_function(callee)
        except KeyError:
            raise _Problem(f"calls @{callee}, which the module does not define") from None
        _req(
            f.arg_types == op.operand_types,
            f"argument types {op.operand_types} differ from @{callee}'s {f.arg_types}",
        )
        _req(f.result_types == op.result_types, f"result types differ from @{callee}'s {f.result_types}")


def _vname(v: Value) -> str:
    return f"%{v.name_hint}" if v.name_hint else f"value of type {v.type}"


def verify_errors(target: Module | Function) -> list[VerifierError]:
    """Every problem found (empty when the IR is valid)."""
    v = _Verifier()
    if isinstance(target, Module):
        for f in target.functions:
            v.function_(f, target)
    else:
        v.function_(target, target.parent)
    return v.errors


def verify(target: Module | Function) -> None:
    """Raise `VerifierError` for the first problem in `target` (a `Module` or a `Function`)."""
    errors = verify_errors(target)
    if errors:
        first = errors[0]
        if len(errors) > 1:
            first.args = (f"{first.args[0]} (and {len(errors) - 1} more problem(s))",)
        raise first
