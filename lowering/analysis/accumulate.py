"""Which `tt.atomic_rmw` ops the reduction network can do as one RED_ACCUMULATE command.

`tl.atomic_add(ptrs, vals, mask)` and friends whose result is unused only combine values into
memory. When the pointers form an affine block (pointer analysis) and the mask is a box (or
absent), the whole block is one `RED_ACCUMULATE` (dst[i] = op(dst[i], src0[i]), atomic per
command) instead of a per-element `DMA_ATOMIC` with a materialised address tensor. Everything
else keeps `DMA_ATOMIC`: a used result (the old values), xchg / cas, i1 data, rank > 4.

Semantics are those of the `DMA_ATOMIC` path: integer add wraps, umax/umin compare unsigned,
float max/min propagate NaN (`Flags.PROPAGATE_NAN`, as `DMA_ATOMIC` MAX/MIN do), float add is
computed in fp32 (fp64 for f64) and rounded once per element and command.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.ir.core import Operation
from lowering.ir.types import FloatType, IntType
from mtia_sim.isa import MAX_DIMS, Flags, ReduceOp

_KINDS: dict[str, tuple[ReduceOp, Flags]] = {
    "add": (ReduceOp.SUM, Flags.NONE),
    "fadd": (ReduceOp.SUM, Flags.NONE),
    "max": (ReduceOp.MAX, Flags.NONE),
    "min": (ReduceOp.MIN, Flags.NONE),
    "umax": (ReduceOp.MAX, Flags.UNSIGNED),
    "umin": (ReduceOp.MIN, Flags.UNSIGNED),
    "and": (ReduceOp.AND, Flags.NONE),
    "or": (ReduceOp.OR, Flags.NONE),
    "xor": (ReduceOp.XOR, Flags.NONE),
}
_BITWISE = frozenset({ReduceOp.AND, ReduceOp.OR, ReduceOp.XOR})


@dataclass(frozen=True)
class Accumulate:
    """The RED_ACCUMULATE form of one atomic: its combine op and flags."""

    subop: ReduceOp
    flags: Flags


def atomic_kind(op: Operation) -> str:
    """The `atomic_rmw_op` of a tt.atomic_rmw, lower case (`add`, `fadd`, `max`, ...)."""
    return str(op.attr("atomic_rmw_op", "add")).lower()


def accumulate_form(op: Operation) -> Accumulate | None:
    """The RED_ACCUMULATE equivalent of `op`, or None when it must stay a DMA_ATOMIC.

    Pointer and mask shapes are not checked here (pointer analysis does that)."""
    if op.name != "tt.atomic_rmw" or not op.results or op.results[0].uses:
        return None
    entry = _KINDS.get(atomic_kind(op))
    if entry is None:
        return None
    subop, flags = entry
    t = op.results[0].type
    elem = t.element_type
    if isinstance(elem, IntType):
        if elem.width == 1:
            return None  # RED_ACCUMULATE takes no I1 operands
    elif isinstance(elem, FloatType):
        if subop in _BITWISE or flags & Flags.UNSIGNED:
            return None
        if subop in (ReduceOp.MAX, ReduceOp.MIN):
            flags |= Flags.PROPAGATE_NAN
    else:
        return None
    if t.is_tensor and len(t.shape) > MAX_DIMS:
        return None
    return Accumulate(subop, flags)
