"""The op registry: for every op the tile IR knows, its operands, results, attributes and syntax.

`OP_SPECS` maps an op name to its `OpSpec`. The parser reads an op's custom (pretty) form with the
handler named by ``spec.syntax`` (``lowering/ttir/custom_forms.py``), the printer writes it back
with the printer of the same name (``lowering/ir/printer.py``), and the verifier checks arity,
attributes and the op's type rule (``lowering/ir/verifier.py``). Enum attributes are stored as
their keyword (``"slt"``, ``"evict_last"``, ``"fadd"``); `ENUMS` gives their integer codes for the
generic form. A new op is a new entry here (and a type rule if it needs one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lowering.ir.core import Operation, Value

__all__ = [
    "OperandSpec",
    "AttrSpec",
    "OpSpec",
    "OP_SPECS",
    "ENUMS",
    "get_spec",
    "is_registered",
    "supported_ops",
    "named_operands",
    "registrar",
]


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

OP_SPECS: dict[str, OpSpec] = {}


def _op(
    name: str,
    syntax: str,
    operands: str = "",
    num_results: int | None = 1,
    *,
    attrs: dict[str, AttrSpec] | None = None,
    num_regions: int = 0,
    terminator: bool = False,
    rule: str | None = None,
    summary: str = "",
) -> None:
    """Register an op. `operands` is a space-separated list of ``name``, ``name?`` or ``name*``."""
    specs = []
    for word in operands.split():
        kind = word[-1] if word[-1] in "?*" else "1"
        specs.append(OperandSpec(word.rstrip("?*"), kind))
    OP_SPECS[name] = OpSpec(
        name, syntax, tuple(specs), num_results, dict(attrs or {}), num_regions, terminator, rule, summary
    )


def _enum(which: str, required: bool = True, default: str | None = None) -> AttrSpec:
    return AttrSpec("enum", required, which, default)


_INT = AttrSpec("int", True)
_BOOL = AttrSpec("bool")


Handler = TypeVar("Handler", bound=Callable[..., Any])


def registrar(table: dict[str, Handler]) -> Callable[[str], Callable[[Handler], Handler]]:
    """The decorator that files a handler under the name an `OpSpec` gives it (its `syntax` or
    `rule`): ``@reg("cmp")`` on a function puts it in `table` under ``"cmp"``."""

    def register(name: str) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            table[name] = fn
            return fn

        return deco

    return register


def get_spec(name: str) -> OpSpec:
    """The spec of op `name` (KeyError when the IR does not know it)."""
    return OP_SPECS[name]


def is_registered(name: str) -> bool:
    return name in OP_SPECS


def supported_ops() -> list[str]:
    """All op names the tile IR supports, sorted."""
    return sorted(OP_SPECS)


def named_operands(op: Operation) -> dict[str, Value | list[Value] | None]:
    """The op's operands by the names of its spec (``{"ptr": v, "mask": v | None, ...}``).

    Optional groups are filled left to right; a variadic group takes what is left, or, when an op
    has several variadic groups (``tt.make_tensor_ptr``: shape/strides/offsets), an equal share.
    ``cf.cond_br`` uses its ``operandSegmentSizes`` attribute.
    """
    spec = OP_SPECS[op.name]
    ops = list(op.operands)
    segs = op.attributes.get("operandSegmentSizes")
    if segs is not None and len(segs) == len(spec.operands):
        out: dict[str, Value | list[Value] | None] = {}
        pos = 0
        for s, n in zip(spec.operands, segs, strict=True):
            group = ops[pos : pos + int(n)]
            pos += int(n)
            out[s.name] = group if s.kind == "*" else (group[0] if group else None)
        return out
    fixed = [s for s in spec.operands if s.kind == "1"]
    optional = [s for s in spec.operands if s.kind == "?"]
    variadic = [s for s in spec.operands if s.kind == "*"]
    spare = len(ops) - len(fixed)
    n_opt = min(len(optional), spare) if not variadic else 0
    per_var = (spare - n_opt) // len(variadic) if variadic else 0
    out = {}
    pos = 0
    opt_left = n_opt
    for s in spec.operands:
        if s.kind == "1":
            out[s.name] = ops[pos] if pos < len(ops) else None
            pos += 1
        elif s.kind == "?":
            if opt_left > 0:
                out[s.name] = ops[pos]
                pos += 1
                opt_left -= 1
            else:
                out[s.name] = None
        else:
            out[s.name] = ops[pos : pos + per_var]
            pos += per_var
    return out


# The op declarations fill OP_SPECS when imported (they use `_op` above).
from lowering.ir import op_table  # noqa: E402, F401
