"""Memory layout unit: strided copies (transpose, broadcast, reshape, slice, concat) and bitcasts."""

from __future__ import annotations

import math

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, DType, Op
from mtia_sim.memory import MemorySystem
from mtia_sim.units.dtypes import np_dtype
from mtia_sim.units.operand import Tally, check_shape


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    """MLU_COPY: dst = src0 (same dtype); MLU_BITCAST: dst = src0's bytes as dtype_out (same itemsize)."""
    shape = check_shape(desc.shape)
    src_dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    out, src = np_dtype(desc.dtype_out, "dst"), np_dtype(src_dt, "src0")
    if desc.op == Op.MLU_COPY and src_dt != desc.dtype_out:
        raise IllegalCommandError(
            f"MLU_COPY does not convert ({src_dt.name} -> {desc.dtype_out.name}); use SIMD_CAST")
    if out.itemsize != src.itemsize:
        raise IllegalCommandError(
            f"MLU_BITCAST needs equal item sizes, got {src_dt.name} -> {desc.dtype_out.name}")
    tally = Tally(mem, pe)
    s = tally.view("src0", desc.src0, src_dt, shape, desc.src0_stride, write=False)
    d = tally.view("dst", desc.dst, desc.dtype_out, shape, desc.dst_stride, write=True)
    d.view(s.dtype)[...] = s
    return tally.event(desc, math.prod(shape), dtype_bytes=out.itemsize)
