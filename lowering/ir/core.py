"""The SSA core of the tile IR: values, operations, blocks and regions.

- `Value`: has a `type` (with `.shape`, `.element_type`, `.is_pointer`), an optional `name_hint`,
  and its `uses` (a list of `Use(op, index)`); it is either an `OpResult` (``.op``, ``.index``) or a
  `BlockArgument` (``.block``, ``.index``).
- `Operation`: `name` (``"tt.load"``), `operands`, `results`, `attributes` (dict of Python values,
  see `lowering.ir.attributes`), `regions`, `location`, `parent` (its `Block`).
- `Block`: `args` (block arguments) and `ops`; `Region`: a list of `blocks`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lowering.ir.attributes import AttrValue
from lowering.ir.location import UNKNOWN_LOC, Location
from lowering.ir.types import Type

__all__ = ["Value", "OpResult", "BlockArgument", "Use", "Operation", "Block", "Region"]


@dataclass(frozen=True)
class Use:
    """One use of a value: operand number `index` of `op`."""

    op: Operation
    index: int


class Value:
    """An SSA value: a typed result of an op or a block argument."""

    __slots__ = ("type", "name_hint", "uses")

    def __init__(self, type: Type, name_hint: str | None = None) -> None:  # noqa: A002
        self.type = type
        self.name_hint = name_hint
        self.uses: list[Use] = []

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def element_type(self) -> Type:
        return self.type.element_type

    @property
    def owner(self) -> Operation | Block:
        raise NotImplementedError

    @property
    def users(self) -> list[Operation]:
        """The ops using this value (each once, in use order)."""
        seen: dict[int, Operation] = {}
        for use in self.uses:
            seen.setdefault(id(use.op), use.op)
        return list(seen.values())

    def replace_all_uses_with(self, new: Value) -> None:
        """Make every user of this value use `new` instead."""
        for use in list(self.uses):
            use.op.set_operand(use.index, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name_hint or '?'}: {self.type}>"


class OpResult(Value):
    """Result number `index` of `op`."""

    __slots__ = ("op", "index")

    def __init__(self, op: Operation, index: int, type: Type, name_hint: str | None = None) -> None:  # noqa: A002
        super().__init__(type, name_hint)
        self.op = op
        self.index = index

    @property
    def owner(self) -> Operation:
        return self.op


class BlockArgument(Value):
    """Argument number `index` of `block` (function arguments, loop induction variables, ...)."""

    __slots__ = ("block", "index")

    def __init__(self, block: Block, index: int, type: Type, name_hint: str | None = None) -> None:  # noqa: A002
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> Block:
        return self.block


class Operation:
    """One op: ``results = name(operands) {attributes} (regions) loc``.

    `successors` holds the target blocks of branch ops (``cf.br``, ``cf.cond_br``); their block
    operands are ordinary operands, split by the ``operandSegmentSizes``-like attribute the op spec
    describes (see `lowering.ir.registry`).
    """

    def __init__(
        self,
        name: str,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, AttrValue] | None = None,
        regions: Sequence[Region] = (),
        location: Location = UNKNOWN_LOC,
        result_names: Sequence[str | None] | None = None,
        successors: Sequence[Block] = (),
    ) -> None:
        self.name = name
        self.attributes: dict[str, AttrValue] = dict(attributes or {})
        self.location = location
        self.parent: Block | None = None
        self._operands: list[Value] = []
        for v in operands:
            self._append_operand(v)
        names = list(result_names) if result_names is not None else [None] * len(result_types)
        self.results: list[OpResult] = [
            OpResult(self, i, t, names[i] if i < len(names) else None) for i, t in enumerate(result_types)
        ]
        self.regions: list[Region] = []
        for r in regions:
            self.add_region(r)
        self.successors: list[Block] = list(successors)

    # -- operands -------------------------------------------------------------------------------
    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    def operand(self, i: int) -> Value:
        return self._operands[i]

    def _append_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand of {self.name} must be a Value, got {type(v).__name__}")
        v.uses.append(Use(self, len(self._operands)))
        self._operands.append(v)

    def set_operand(self, i: int, v: Value) -> None:
        """Replace operand `i` with `v` (keeps use lists right)."""
        old = self._operands[i]
        old.uses = [u for u in old.uses if not (u.op is self and u.index == i)]
        self._operands[i] = v
        v.uses.append(Use(self, i))

    def set_operands(self, values: Sequence[Value]) -> None:
        """Replace the whole operand list."""
        self.drop_operand_uses()
        self._operands = []
        for v in values:
            self._append_operand(v)

    def drop_operand_uses(self) -> None:
        for i, old in enumerate(self._operands):
            old.uses = [u for u in old.uses if not (u.op is self and u.index == i)]

    # -- results, types, attributes -------------------------------------------------------------
    @property
    def result(self) -> OpResult:
        """The single result (error if the op has none or several)."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def operand_types(self) -> list[Type]:
        return [v.type for v in self._operands]

    @property
    def result_types(self) -> list[Type]:
        return [r.type for r in self.results]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute `name`, or `default` when absent."""
        return self.attributes.get(name, default)

    # -- regions and nesting ---------------------------------------------------------------------
    def add_region(self, region: Region) -> Region:
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def parent_op(self) -> Operation | None:
        """The op whose region holds this op (None at function level)."""
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in pre-order (program order)."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def clone(self, value_map: dict[Value, Value] | None = None) -> Operation:
        """A deep copy (regions included) that is not in any block.

        Operands found in `value_map` are replaced by their mapping (others are kept); the map is
        extended with this op's results and the values defined inside its regions, so cloning op by
        op copies a whole block (the building block of inlining and unrolling).
        """
        vmap: dict[Value, Value] = value_map if value_map is not None else {}
        new = Operation(
            self.name,
            [vmap.get(v, v) for v in self._operands],
            self.result_types,
            dict(self.attributes),
            [],
            self.location,
            [r.name_hint for r in self.results],
            self.successors,
        )
        for region in self.regions:
            new.add_region(region.clone(vmap))
        for old, res in zip(self.results, new.results, strict=True):
            vmap[old] = res
        return new

    def erase(self) -> None:
        """Remove this op from its block; its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"cannot erase {self.name}: result #{r.index} still has {len(r.uses)} uses")
        self.drop_operand_uses()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def __repr__(self) -> str:
        res = ", ".join(f"%{r.name_hint or '?'}" for r in self.results)
        return f"<Operation {res + ' = ' if res else ''}{self.name} ({len(self._operands)} operands)>"


class Block:
    """A list of ops with typed arguments. Regions of structured ops (``scf.for``) have one block."""

    def __init__(self, arg_types: Iterable[Type] = (), arg_names: Sequence[str | None] | None = None) -> None:
        self.args: list[BlockArgument] = []
        self.ops: list[Operation] = []
        self.parent: Region | None = None
        self.label: str | None = None
        names = list(arg_names) if arg_names is not None else []
        for i, t in enumerate(arg_types):
            self.add_arg(t, names[i] if i < len(names) else None)

    def add_arg(self, t: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(self, len(self.args), t, name_hint)
        self.args.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        return self.insert(self.ops.index(anchor), op)

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None

    def walk(self) -> Iterator[Operation]:
        for op in list(self.ops):
            yield from op.walk()

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)


class Region:
    """A list of blocks owned by an op (or a function body)."""

    def __init__(self, blocks: Iterable[Block] = ()) -> None:
        self.blocks: list[Block] = []
        self.parent: Any = None  # Operation, or Function for a function body
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def entry(self) -> Block:
        """The first block."""
        if not self.blocks:
            raise ValueError("region has no blocks")
        return self.blocks[0]

    def walk(self) -> Iterator[Operation]:
        for block in self.blocks:
            yield from block.walk()

    def clone(self, value_map: dict[Value, Value] | None = None) -> Region:
        """A deep copy of the region; block arguments and op results are mapped in `value_map`."""
        vmap: dict[Value, Value] = value_map if value_map is not None else {}
        new = Region()
        blocks: dict[int, Block] = {}
        for b in self.blocks:
            nb = Block([a.type for a in b.args], [a.name_hint for a in b.args])
            nb.label = b.label
            for old, arg in zip(b.args, nb.args, strict=True):
                vmap[old] = arg
            blocks[id(b)] = nb
            new.add_block(nb)
        for b in self.blocks:
            for op in b.ops:
                c = op.clone(vmap)
                c.successors = [blocks.get(id(s), s) for s in c.successors]
                blocks[id(b)].append(c)
        return new
