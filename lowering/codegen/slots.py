"""Loop-carried and block-argument slots (scf.for / scf.while / scf.if, multi-block bodies): where a
value that crosses a region boundary lives, and the parallel copy that updates them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.local_alloc import Buffer
from lowering.codegen.values import Buf, DeferredScalar
from lowering.ir.core import Value

if TYPE_CHECKING:
    from lowering.codegen.lower import KernelLowering

# -- loop-carried and block-argument slots (scf.for / scf.while / scf.if, multi-block bodies) ------
Slot: TypeAlias = Any  # a stack slot (scalar), a pinned local-store Buf (tensor), or a ScalarSlot


@dataclass
class ScalarSlot:
    """A loop-carried scalar that units produce (a running max / sum): it stays in a 1-element
    local-store buffer so the loop never waits for the units to hand it to the core."""

    buf: Buf
    ty: ir.Type


def make_slots(
    ctx: KernelLowering, values: Sequence[Value], name: str, on_units: Sequence[bool] = ()
) -> list[Slot]:
    slots: list[Slot] = []
    for i, v in enumerate(values):
        if v.type.is_tensor or (i < len(on_units) and on_units[i]):
            shape = tuple(v.shape) if v.type.is_tensor else (1,)
            buf = ctx.new_buf(v, shape, dt.to_dtype(v.type), name=f"{name} %{v.name_hint or '?'}")
            buf.buffer.pinned += 1
            if buf.buffer in ctx.temps:
                ctx.temps.remove(buf.buffer)
            slots.append(buf if v.type.is_tensor else ScalarSlot(buf, dt.core_type(v.type)))
        else:
            slots.append(ctx.alloca(dt.core_type(v.type), name=name))
    return slots


def store_slots(ctx: KernelLowering, slots: Sequence[Slot], values: Sequence[Value]) -> None:
    """Each slot gets its value, as one parallel copy (a loop's yield): a value that lives in another
    slot's local-store buffer -- a carried value swapped, or computed in place in a carried value's
    slot once that value died -- is read before that slot is overwritten (through a temporary where
    the copies form a cycle)."""
    sources: dict[int, Any] = {}
    for i, (slot, v) in enumerate(zip(slots, values, strict=True)):
        if isinstance(slot, Buf):
            sources[i] = ctx.tensor(v)
        elif isinstance(slot, ScalarSlot):
            d = ctx.deferred(v)
            sources[i] = d.buf if d is not None else None
    for i in _copy_order(slots, sources, ctx):
        slot, v, src = slots[i], values[i], sources.get(i)
        if isinstance(slot, Buf):
            assert src is not None  # a tensor slot's source is always a tensor (set above)
            ctx.store_into(slot, src)
        elif isinstance(slot, ScalarSlot):
            if src is not None:
                if src.buffer is not slot.buf.buffer:
                    ctx.copy(slot.buf, src.view((1,), (0,)))
            else:
                ctx.fill(slot.buf, ctx.scalar(v), slot.buf.dtype)
        else:
            ctx.b.store(ctx.scalar(v), slot)


def _slot_buffer(slot: Slot) -> Buffer | None:
    buf = slot.buf if isinstance(slot, ScalarSlot) else slot
    return buf.buffer if isinstance(buf, Buf) else None


def _copy_order(slots: Sequence[Slot], sources: dict[int, Any], ctx: KernelLowering) -> list[int]:
    """An order of the slot stores in which no slot is written while another store still has to read
    it; a source caught in a cycle is first copied to a temporary (`sources` is updated)."""
    owner = {id(b): i for i, s in enumerate(slots) if (b := _slot_buffer(s)) is not None}

    def reads(i: int) -> int | None:  # the other slot whose buffer store i reads
        src = sources.get(i)
        j = owner.get(id(src.buffer)) if isinstance(src, Buf) else None
        return j if j is not None and j != i else None

    pending, order = list(range(len(slots))), []
    while pending:
        free = [i for i in pending if not any(reads(k) == i for k in pending if k != i)]
        if not free:  # a cycle: free its first member's source
            i = pending[0]
            src = sources[i]
            tmp = ctx.new_buf(None, src.shape, src.dtype)
            ctx.copy(tmp, src)
            sources[i] = tmp
            continue
        order.append(free[0])
        pending.remove(free[0])
    return order


def bind_slots(ctx: KernelLowering, slots: Sequence[Slot], values: Sequence[Value]) -> None:
    for slot, v in zip(slots, values, strict=True):
        if isinstance(slot, Buf):
            ctx.bind(v, slot.view(slot.shape, slot.strides))
        elif isinstance(slot, ScalarSlot):
            ctx.bind(v, DeferredScalar(slot.buf.view((1,), (0,)), slot.ty))
        else:
            ctx.bind(v, ctx.b.load(slot))


def unpin(ctx: KernelLowering, slots: Sequence[Slot]) -> None:
    for slot in slots:
        buf = slot.buf if isinstance(slot, ScalarSlot) else slot
        if isinstance(buf, Buf):
            buf.buffer.pinned -= 1
            ctx.alloc.release(buf.buffer)
