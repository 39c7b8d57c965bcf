"""Functional units of a PE. `execute` runs one decoded command on the memories at once."""

from __future__ import annotations

from collections.abc import Callable

from mtia_sim.errors import IllegalCommandError, SimulationError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, Op, Unit
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dma, dpe, mlu, reduction, simd

UNIT_EXECUTORS: dict[Unit, Callable[[CommandDescriptor, MemorySystem, int], CommandEvent]] = {
    Unit.DMA: dma.execute, Unit.DPE: dpe.execute, Unit.SIMD: simd.execute, Unit.RED: reduction.execute,
    Unit.MLU: mlu.execute,
}


REPLAYERS: dict[Op, Callable[[CommandDescriptor, MemorySystem, int], Callable[[], None] | None]] = {
    Op.DMA_COPY: dma.dma_copy_replay, Op.DPE_MATMUL: dpe.replay, Op.SIMD_UNARY: simd.replay,
    Op.SIMD_BINARY: simd.replay, Op.SIMD_FILL: simd.replay,
}


def replay(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> Callable[[], None] | None:
    """After `execute(desc, mem, pe)` succeeded: a closure that redoes the command's effect on the
    same operand views, or None. Only commands whose CommandEvent depends on the descriptor alone
    (not on data: no masks, no address lists) get one, so a caller may reuse the first event."""
    make = REPLAYERS.get(desc.op)
    if make is None:
        return None
    try:
        return make(desc, mem, pe)
    except (SimulationError, ValueError, TypeError, OverflowError, IndexError):
        return None


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    """Execute `desc` functionally for PE `pe` and return its CommandEvent (pc not set).

    Raises IllegalCommandError / LocalStoreOverflowError / MemoryFaultError without a location;
    the caller adds it.
    """
    run = UNIT_EXECUTORS.get(desc.op.unit)
    if run is None:
        raise IllegalCommandError(f"opcode {desc.op.name} has no unit")
    try:
        return run(desc, mem, pe)  # callers run inside np.errstate(all="ignore"): C-like silent FP
    except (ValueError, TypeError, OverflowError, IndexError) as exc:
        # numpy rejected an operand combination the checks above did not catch
        raise IllegalCommandError(f"{desc.op.name}: invalid operand combination ({exc})") from exc
