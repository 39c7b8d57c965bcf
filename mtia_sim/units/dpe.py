"""Dot-product engine: dst[M,N] (+)= src0[M,K] @ src1[K,N] with strided operands.

Index space (M, N, K, 1) under the generic operand rule: src0 uses strides[0] (m) and
strides[2] (k), src1 strides[2] (k) and strides[1] (n), dst strides[0] (m) and strides[1] (n);
the other stride words are ignored. Floats multiply in fp32 (fp64 for F64) with an fp32
accumulator; integers (I8/U8/I16/I32) accumulate exactly and wrap to the I32 destination.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, DType, Flags
from mtia_sim.memory import MemorySystem
from mtia_sim.units.dtypes import FLOATS, INTS, convert, np_dtype
from mtia_sim.units.operand import Tally, check_shape

IN_TYPES = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64, DType.F8E4M3, DType.F8E5M2,
                      DType.I8, DType.U8, DType.I16, DType.I32})
OUT_TYPES = frozenset({DType.F32, DType.F16, DType.BF16, DType.F64, DType.I32, DType.I64})


def _prepare(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> tuple[Tally, Callable[[], None]]:
    """Check a DPE_MATMUL and build its operand views; returns (tally, the math as a closure)."""
    shape = check_shape(desc.shape)
    m, n, k, one = shape
    if one != 1:
        raise IllegalCommandError(f"DPE_MATMUL shape is (M, N, K, 1), got {list(shape)}")
    a_dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    b_dt = desc.dtype_in1 if desc.dtype_in1 != DType.NONE else a_dt
    out_dt = desc.dtype_out
    if a_dt not in IN_TYPES or b_dt not in IN_TYPES or out_dt not in OUT_TYPES:
        raise IllegalCommandError(
            f"DPE_MATMUL: unsupported types {a_dt.name} x {b_dt.name} -> {out_dt.name}")
    if (a_dt in FLOATS) != (b_dt in FLOATS) or (a_dt in INTS) != (out_dt in INTS):
        raise IllegalCommandError(
            f"DPE_MATMUL: cannot mix {a_dt.name} x {b_dt.name} -> {out_dt.name} (float with int)")
    tally = Tally(mem, pe)
    s0, s1, sd = desc.src0_stride, desc.src1_stride, desc.dst_stride
    a = tally.view("src0", desc.src0, a_dt, (m, k), [s0[0], s0[2]], write=False)
    b = tally.view("src1", desc.src1, b_dt, (k, n), [s1[2], s1[1]], write=False)
    acc = bool(desc.flags & Flags.ACCUMULATE)
    d = tally.view("dst", desc.dst, out_dt, (m, n), [sd[0], sd[1]], write=True, count_bytes=False)
    tally.count(tally.resolve("dst", desc.dst, 0, 1).level, d.dtype.itemsize * m * n, True)
    if acc:
        tally.count(tally.resolve("dst", desc.dst, 0, 1).level, d.dtype.itemsize * m * n, False)
    if a_dt in FLOATS:
        ct: type = np.float64 if DType.F64 in (a_dt, b_dt, out_dt) else np.float32
    else:
        ct = np.int64

    def run() -> None:
        r = np.matmul(a.astype(ct), b.astype(ct))
        if acc:
            r = r + d.astype(ct)
        d[...] = convert(r, out_dt)
    return tally, run


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    tally, run = _prepare(desc, mem, pe)
    run()
    m, n, k, _ = desc.shape
    a_dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    return tally.event(desc, m * n * k, flops=2 * m * n * k, dtype_bytes=np_dtype(a_dt).itemsize,
                       matmul_mnk=(m, n, k))


def replay(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> Callable[[], None]:
    """A closure redoing this matmul on its operands (its event never changes)."""
    return _prepare(desc, mem, pe)[1]
