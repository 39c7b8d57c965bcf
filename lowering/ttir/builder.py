"""Raw op records → tile IR: resolves SSA names, blocks and ``#loc`` aliases, reads custom op forms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lowering.compat import normalize
from lowering.ir.core import Block, Operation, Region, Value
from lowering.ir.location import UNKNOWN_LOC, Location
from lowering.ir.module import Function, Module
from lowering.ir.registry import OP_SPECS, supported_ops
from lowering.ir.types import Type
from lowering.ttir import forms_scalar, forms_tensor  # noqa: F401 - importing them fills READERS
from lowering.ttir.custom_forms import READERS, Cursor, Parsed, normalize_enum_attrs
from lowering.ttir.errors import TTIRParseError, UnsupportedOpError
from lowering.ttir.raw import Item, RawFunc, RawModule, RawOp, RawRegion

__all__ = ["IRBuilder", "LocationResolver"]


class LocationResolver:
    """Turns raw MLIR locations (with ``#locN`` alias references) into `Location`s, memoized."""

    def __init__(self, aliases: dict[str, Any]) -> None:
        self.aliases = aliases
        self.cache: dict[str, Location] = {}

    def resolve(self, raw: Any, depth: int = 0) -> Location:
        if raw is None or depth > 64:
            return UNKNOWN_LOC
        kind = raw[0]
        if kind == "ref":
            name = raw[1]
            if name not in self.cache:
                target = self.aliases.get(name)
                self.cache[name] = UNKNOWN_LOC if target is None else self.resolve(target, depth + 1)
            return self.cache[name]
        if kind == "file":
            return Location(raw[1], raw[2], raw[3])
        if kind == "name":
            child = self.resolve(raw[2], depth + 1) if raw[2] is not None else UNKNOWN_LOC
            return Location(child.file, child.line, child.col, raw[1], child.caller)
        if kind == "callsite":
            callee = self.resolve(raw[1], depth + 1)
            caller = self.resolve(raw[2], depth + 1)
            return Location(
                callee.file, callee.line, callee.col, callee.name, _append_caller(callee.caller, caller)
            )
        if kind == "fused":
            parts = [self.resolve(p, depth + 1) for p in raw[1]]
            known = [p for p in parts if p.is_known]
            return known[0] if known else UNKNOWN_LOC
        return UNKNOWN_LOC


def _append_caller(chain: Location | None, caller: Location) -> Location | None:
    if not caller.is_known:
        return chain
    if chain is None:
        return caller
    return Location(chain.file, chain.line, chain.col, chain.name, _append_caller(chain.caller, caller))


class IRBuilder:
    """Builds a `Module` from a `RawModule`; `text` is the TTIR source (for error snippets)."""

    def __init__(self, text: str, raw: RawModule) -> None:
        self.text = text
        self.raw = raw
        self.locs = LocationResolver(raw.aliases)
        self.values: dict[str, Value] = {}
        self.blocks: dict[str, Block] = {}
        self.block_scopes: list[dict[str, Block]] = []
        self.current_line = 0

    # -- BuildContext --------------------------------------------------------------------------
    def error(self, message: str, item: Item | None = None) -> TTIRParseError:
        line = item.line if item is not None and item.line else self.current_line
        col = item.col if item is not None and item.line else 1
        return TTIRParseError(message, line, col, self.text)

    def lookup(self, name: str, item: Item | None = None) -> Value:
        v = self.values.get(name)
        if v is None:
            raise self.error(f"use of undefined value %{name}", item)
        return v

    def block_ref(self, label: str) -> Block:
        scope = self.block_scopes[-1] if self.block_scopes else self.blocks
        if label not in scope:
            raise self.error(f"branch to undefined block {label}")
        return scope[label]

    def build_region(
        self, raw: RawRegion, arg_names: Sequence[str] | None = None, arg_types: Sequence[Type] | None = None
    ) -> Region:
        region = Region()
        labels: dict[str, Block] = {}
        self.block_scopes.append(labels)
        for i, rb in enumerate(raw.blocks):
            block = Block()
            if rb.label is not None:
                if rb.label in labels:
                    raise self.error(f"block {rb.label} defined twice in one region")
                block.label = rb.label
                labels[rb.label] = block
            region.add_block(block)
            if i == 0 and arg_names is not None and not rb.args:
                for n, t in zip(arg_names, arg_types or [], strict=True):
                    self._define(n, block.add_arg(t, _hint(n)))
            for name, t, _loc in rb.args:
                self._define(name, block.add_arg(t, _hint(name)))
        for block, rb in zip(region.blocks, raw.blocks, strict=True):
            for rop in rb.ops:
                if isinstance(rop, RawFunc):
                    raise TTIRParseError("tt.func nested inside a region", rop.line, 1, self.text)
                block.append(self.build_op(rop))
        self.block_scopes.pop()
        return region

    def _define(self, name: str, v: Value) -> None:
        self.values[name] = v

    # -- ops -----------------------------------------------------------------------------------
    def build_op(self, raw: RawOp) -> Operation:
        raw = normalize(raw)  # Triton 3.7 spellings -> the tile IR's
        self.current_line = raw.line
        loc = self.locs.resolve(raw.loc)
        spec = OP_SPECS.get(raw.name)
        if spec is None:
            raise UnsupportedOpError(raw.name, loc, raw.line, supported_ops())
        if raw.items is not None:
            if spec.syntax == "generic":
                raise self.error(
                    f"'{raw.name}' has no custom form; write it in the generic form "
                    f'"{raw.name}"(...) ... : (...) -> ...'
                )
            parsed = READERS[spec.syntax](Cursor(raw.items, self, raw), spec)
        else:
            parsed = self._generic(raw)
        normalize_enum_attrs(spec, parsed.attrs)
        n_results = sum(n for _, n in raw.results)
        if n_results != len(parsed.result_types):
            raise self.error(
                f"'{raw.name}' defines {n_results} result(s) but its types give {len(parsed.result_types)}"
            )
        names: list[str | None] = []
        for name, n in raw.results:
            names += [_hint(name)] * n if n == 1 else [_hint(name)] * n
        op = Operation(
            raw.name,
            parsed.operands,
            parsed.result_types,
            parsed.attrs,
            parsed.regions,
            loc,
            names,
            parsed.successors,
        )
        i = 0
        for name, n in raw.results:
            if n == 1:
                self._define(name, op.results[i])
            else:
                for k in range(n):
                    self._define(f"{name}#{k}", op.results[i + k])
                self._define(name, op.results[i])
            i += n
        return op

    def _generic(self, raw: RawOp) -> Parsed:
        assert raw.operands is not None
        operands = [self.lookup(n) for n in raw.operands]
        inputs, results = raw.func_type if raw.func_type is not None else ([], [])
        if len(inputs) != len(operands):
            raise self.error(f"'{raw.name}' has {len(operands)} operands but its type lists {len(inputs)}")
        attrs = dict(raw.props)
        attrs.update(raw.attrs)
        regions = [self.build_region(r) for r in raw.regions]
        successors = [self.block_ref(s) for s in raw.successors]
        return Parsed(operands, list(results), attrs, regions, successors)

    # -- functions and module ------------------------------------------------------------------
    def build_function(self, raw: RawFunc) -> Function:
        self.values = {}
        self.blocks = {}
        self.current_line = raw.line
        names = [a[0] for a in raw.args]
        types = [a[1] for a in raw.args]
        body = None
        if raw.body is not None:
            body = self.build_region(raw.body, [n or f"arg{i}" for i, n in enumerate(names)], types)
        fn = Function(
            raw.name,
            types,
            raw.results,
            visibility=raw.visibility,
            arg_names=[_hint(n) if n else None for n in names],
            arg_attrs=[a[2] for a in raw.args],
            arg_locations=[self.locs.resolve(a[3]) for a in raw.args],
            attributes=raw.attrs,
            location=self.locs.resolve(raw.loc),
            body=body,
        )
        return fn

    def build_module(self) -> Module:
        module = Module(attributes=self.raw.attrs, location=self.locs.resolve(self.raw.loc))
        for rf in self.raw.funcs:
            if not isinstance(rf, RawFunc):
                line = getattr(rf, "line", 0)
                name = getattr(rf, "name", "?")
                if name not in OP_SPECS:
                    raise UnsupportedOpError(
                        name, self.locs.resolve(getattr(rf, "loc", None)), line, supported_ops()
                    )
                raise TTIRParseError(f"op '{name}' outside a function", line, 1, self.text)
            module.add_function(self.build_function(rf))
        return module


def _hint(name: str) -> str | None:
    """A printable name hint from an SSA name (``offs_2`` → ``offs_2``; ``0`` → None)."""
    base = name.split("#", 1)[0]
    return None if base.isdigit() else base
