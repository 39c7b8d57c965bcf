"""The op registry: for every op the tile IR knows, its operands, results, attributes and syntax.

`OP_SPECS` maps an op name to its `OpSpec`. The parser reads an op's custom (pretty) form with the
handler named by ``spec.syntax`` (``lowering/ttir/custom_forms.py``), the printer writes it back
with the printer of the same name (``lowering/ir/printer.py``), and the verifier checks arity,
attributes and the op's type rule (``lowering/ir/verifier.py``). Enum attributes are stored as
their keyword (``"slt"``, ``"evict_last"``, ``"fadd"``); `ENUMS` gives their integer codes for the
generic form. A new op is a new entry in `lowering.ir.op_table` (and a type rule if it needs one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from lowering.ir.core import Operation, Value
from lowering.ir.op_spec import ENUMS, AttrSpec, OperandSpec, OpSpec
from lowering.ir.op_table import OP_SPECS

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
