"""The tile-IR verifier: structure (SSA visibility, arity, attributes, terminators) and per-op type rules.

``verify(module)`` raises `VerifierError` at the first problem, naming the op, its kernel source
location and what is wrong. ``verify_errors(module)`` returns all problems as strings.
"""

from __future__ import annotations

from lowering.ir.attributes import UnitAttr
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.module import Function, Module
from lowering.ir.registry import ENUMS, OP_SPECS, OpSpec
from lowering.ir.type_rules import TYPE_RULES, RuleViolation, need

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
        except RuleViolation as p:
            self.fail(str(p), op)
        except (KeyError, IndexError, AssertionError, TypeError, ValueError) as exc:
            self.fail(f"malformed op ({type(exc).__name__}: {exc})", op)
        for r in op.regions:
            self.region(r, scope)

    def arity(self, op: Operation, spec: OpSpec) -> None:
        n = len(op.operands)
        lo, hi = spec.min_operands, spec.max_operands
        need(
            n >= lo and (hi is None or n <= hi),
            f"has {n} operands, expects {lo}" + ("" if hi == lo else f"..{hi if hi is not None else 'any'}"),
        )
        if spec.num_results is not None:
            need(
                len(op.results) == spec.num_results,
                f"has {len(op.results)} results, expects {spec.num_results}",
            )
        need(
            len(op.regions) == spec.num_regions, f"has {len(op.regions)} regions, expects {spec.num_regions}"
        )

    def attributes(self, op: Operation, spec: OpSpec) -> None:
        for name, a in spec.attrs.items():
            if name not in op.attributes:
                need(not a.required, f"missing required attribute '{name}'")
                continue
            v = op.attributes[name]
            if a.kind == "enum" and a.enum and name != "axis":
                need(
                    v in ENUMS[a.enum], f"attribute '{name}' = {v!r} is not one of {', '.join(ENUMS[a.enum])}"
                )
            elif a.kind == "int":
                need(isinstance(v, int) and not isinstance(v, bool), f"attribute '{name}' must be an integer")
            elif a.kind == "bool":
                need(isinstance(v, bool), f"attribute '{name}' must be a boolean")
            elif a.kind == "str":
                need(isinstance(v, str), f"attribute '{name}' must be a string")
            elif a.kind == "unit":
                need(isinstance(v, UnitAttr), f"attribute '{name}' must be a unit attribute")
            elif a.kind == "array":
                need(isinstance(v, list), f"attribute '{name}' must be an array")

    def call(self, op: Operation) -> None:
        if self.module is None:
            return
        callee = op.attributes["callee"].name
        try:
            f = self.module.get_function(callee)
        except KeyError:
            raise RuleViolation(f"calls @{callee}, which the module does not define") from None
        need(
            f.arg_types == op.operand_types,
            f"argument types {op.operand_types} differ from @{callee}'s {f.arg_types}",
        )
        need(f.result_types == op.result_types, f"result types differ from @{callee}'s {f.result_types}")


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
