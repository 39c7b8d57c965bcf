"""Functions (``tt.func``) and modules of the tile IR."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from lowering.ir.attributes import AttrValue
from lowering.ir.core import Block, BlockArgument, Operation, Region
from lowering.ir.location import UNKNOWN_LOC, Location
from lowering.ir.types import FunctionType, Type

__all__ = ["Function", "Module"]


class Function:
    """A ``tt.func``: `name`, `visibility` (``"public"`` kernels, ``"private"`` helpers), `args` (the
    entry block's arguments), `arg_attrs` (one dict per argument, e.g. ``{"tt.divisibility": 16}``),
    `result_types`, `attributes` (e.g. ``noinline``), `body` (a `Region`) and `location`.
    """

    def __init__(
        self,
        name: str,
        arg_types: Sequence[Type],
        result_types: Sequence[Type] = (),
        *,
        visibility: str | None = "public",
        arg_names: Sequence[str | None] | None = None,
        arg_attrs: Sequence[dict[str, AttrValue]] | None = None,
        arg_locations: Sequence[Location] | None = None,
        attributes: dict[str, AttrValue] | None = None,
        location: Location = UNKNOWN_LOC,
        body: Region | None = None,
    ) -> None:
        self.name = name
        self.visibility = visibility
        self.result_types: list[Type] = list(result_types)
        self.attributes: dict[str, AttrValue] = dict(attributes or {})
        self.location = location
        if body is None:
            body = Region([Block(arg_types, arg_names)])
        self.body = body
        body.parent = self
        n = len(self.args)
        self.arg_attrs: list[dict[str, AttrValue]] = [dict(a) for a in (arg_attrs or [{}] * n)]
        self.arg_locations: list[Location] = list(arg_locations or [UNKNOWN_LOC] * n)
        self.parent: Module | None = None

    @property
    def entry(self) -> Block:
        return self.body.entry

    @property
    def args(self) -> list[BlockArgument]:
        return self.body.entry.args if self.body.blocks else []

    @property
    def arg_types(self) -> list[Type]:
        return [a.type for a in self.args]

    @property
    def function_type(self) -> FunctionType:
        return FunctionType(tuple(self.arg_types), tuple(self.result_types))

    @property
    def is_declaration(self) -> bool:
        return not self.body.blocks or not self.body.entry.ops

    def arg_attr(self, index: int, name: str, default: Any = None) -> Any:
        """Attribute `name` of argument `index` (e.g. ``arg_attr(0, "tt.divisibility")``)."""
        return self.arg_attrs[index].get(name, default)

    def walk(self) -> Iterator[Operation]:
        """Every op of the body, nested ones included, in program order."""
        return self.body.walk()

    def __repr__(self) -> str:
        return f"<Function @{self.name}{self.function_type}>"


class Module:
    """A module: its `functions` (in order) and module `attributes`."""

    def __init__(
        self,
        functions: Sequence[Function] = (),
        attributes: dict[str, AttrValue] | None = None,
        location: Location = UNKNOWN_LOC,
    ) -> None:
        self.functions: list[Function] = []
        self.attributes: dict[str, AttrValue] = dict(attributes or {})
        self.location = location
        for f in functions:
            self.add_function(f)

    def add_function(self, f: Function) -> Function:
        if any(g.name == f.name for g in self.functions):
            raise ValueError(f"module already has a function @{f.name}")
        f.parent = self
        self.functions.append(f)
        return f

    def get_function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(
            f"no function @{name} in module (functions: {', '.join(g.name for g in self.functions)})"
        )

    @property
    def kernels(self) -> list[Function]:
        """The public functions (the kernels Triton launches)."""
        return [f for f in self.functions if f.visibility in (None, "public")]

    def walk(self) -> Iterator[Operation]:
        """Every op of every function, in order."""
        for f in self.functions:
            yield from f.walk()

    def __str__(self) -> str:
        from lowering.ir.printer import print_module

        return print_module(self)

    def __repr__(self) -> str:
        return f"<Module {', '.join('@' + f.name for f in self.functions)}>"
