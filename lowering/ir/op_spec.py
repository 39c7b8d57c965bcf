"""What the tile IR records about an op: its operand groups, attributes and syntax (`OpSpec`), and
the integer codes of enum attributes (`ENUMS`). The table of every op is `lowering.ir.op_table`;
`lowering.ir.registry` is the way in for readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OperandSpec", "AttrSpec", "OpSpec", "ENUMS"]


@dataclass(frozen=True)
class OperandSpec:
    """An operand group: `kind` is ``"1"`` (exactly one), ``"?"`` (optional) or ``"*"`` (variadic)."""

    name: str
    kind: str = "1"


@dataclass(frozen=True)
class AttrSpec:
    """An inherent attribute: `kind` is int/bool/str/enum/array/dense/float/any/type/symbol."""

    kind: str
    required: bool = False
    enum: str | None = None  # key into ENUMS for kind == "enum"
    default: Any = None  # filled in by the parser when absent (None: no default)


@dataclass(frozen=True)
class OpSpec:
    """What the IR knows about one op."""

    name: str
    syntax: str
    operands: tuple[OperandSpec, ...] = ()
    num_results: int | None = 1  # None: variadic
    attrs: dict[str, AttrSpec] = field(default_factory=dict)
    num_regions: int = 0
    terminator: bool = False
    rule: str | None = None  # type rule name in the verifier
    summary: str = ""

    @property
    def min_operands(self) -> int:
        return sum(1 for o in self.operands if o.kind == "1")

    @property
    def max_operands(self) -> int | None:
        if any(o.kind == "*" for o in self.operands):
            return None
        return len(self.operands)


#: Enum keyword ↔ integer code (the generic form prints the integer).
ENUMS: dict[str, dict[str, int]] = {
    "cmpi": {
        "eq": 0,
        "ne": 1,
        "slt": 2,
        "sle": 3,
        "sgt": 4,
        "sge": 5,
        "ult": 6,
        "ule": 7,
        "ugt": 8,
        "uge": 9,
    },
    "cmpf": {
        "false": 0,
        "oeq": 1,
        "ogt": 2,
        "oge": 3,
        "olt": 4,
        "ole": 5,
        "one": 6,
        "ord": 7,
        "ueq": 8,
        "ugt": 9,
        "uge": 10,
        "ult": 11,
        "ule": 12,
        "une": 13,
        "uno": 14,
        "true": 15,
    },
    "cache": {"none": 1, "ca": 2, "cg": 3, "wb": 4, "cs": 5, "wt": 6, "cv": 7},
    "evict": {"evict_normal": 1, "evict_first": 2, "evict_last": 3},
    "rmw": {
        "and": 1,
        "or": 2,
        "xor": 3,
        "add": 4,
        "fadd": 5,
        "max": 6,
        "min": 7,
        "umax": 8,
        "umin": 9,
        "exch": 10,
    },
    "sem": {"relaxed": 1, "acquire": 2, "release": 3, "acq_rel": 4},
    "scope": {"gpu": 1, "cta": 2, "sys": 3},
    "precision": {"tf32": 0, "tf32x3": 1, "ieee": 2, "bf16x3": 3, "bf16x6": 4},
    "rounding": {"rtz": 0, "rtne": 1},
    "padding": {"zero": 1, "nan": 2},
    "propagate_nan": {"none": 0, "all": 65535},
    "scale_elem": {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4, "bf16": 5, "fp16": 6},
    "program_dim": {"x": 0, "y": 1, "z": 2},
    "reduce_kind": {"add": 1, "min": 2, "max": 3, "inc": 4, "dec": 5, "and": 6, "or": 7, "xor": 8},
}
