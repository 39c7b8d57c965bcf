"""Functional units of a PE. `execute` runs one decoded command on the memories at once."""

from __future__ import annotations

from collections.abc import Callable

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, Unit
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dma, dpe, mlu, reduction, simd

UNIT_EXECUTORS: dict[Unit, Callable[[CommandDescriptor, MemorySystem, int], CommandEvent]] = {
    Unit.DMA: dma.execute, Unit.DPE: dpe.execute, Unit.SIMD: simd.execute, Unit.RED: reduction.execute,
    Unit.MLU: mlu.execute,
}


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
