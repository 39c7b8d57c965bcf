"""Reduction engine, across PEs: RED_ACCUMULATE combines a local tile into a tensor anywhere.

dst[i] = subop(dst[i], src0[i]) over the 4-D index space, with src0 in this PE's local store and
dst in any memory (this or another PE's local store, SRAM, DRAM). The command is atomic: it reads
dst, combines and writes it back at once, so programs accumulating into one tensor one after
another (docs/DECISIONS.md D1) give a timing-independent result. The rules are in isa.py.
"""

from __future__ import annotations

import math

import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent, MemLevel
from mtia_sim.isa import CommandDescriptor, DType, Flags, ReduceOp
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dtypes
from mtia_sim.units.dtypes import FLOATS, compute_dtype, convert, np_dtype
from mtia_sim.units.operand import Tally, check_shape

_INT_ONLY = frozenset({ReduceOp.AND, ReduceOp.OR, ReduceOp.XOR})
_ALLOWED = frozenset({ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD}) | _INT_ONLY


def _subop(desc: CommandDescriptor) -> ReduceOp:
    try:
        op = ReduceOp(desc.subop)
    except ValueError:
        raise IllegalCommandError(f"RED_ACCUMULATE: unknown ReduceOp {desc.subop}; use one of "
                                  + ", ".join(o.name for o in sorted(_ALLOWED))) from None
    if op not in _ALLOWED:
        raise IllegalCommandError(f"RED_ACCUMULATE cannot combine with {op.name} (no index across PEs); "
                                  "use SUM, MAX, MIN, PROD, AND, OR or XOR")
    return op


def _dtypes(desc: CommandDescriptor, op: ReduceOp) -> tuple[DType, DType]:
    """(src0 type, dst type), checked."""
    dst_dt = desc.dtype_out
    src_dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else dst_dt
    np_dtype(dst_dt, "RED_ACCUMULATE dst")
    if DType.I1 in (src_dt, dst_dt):
        raise IllegalCommandError("RED_ACCUMULATE does not take I1 operands; use U8 (0/1) instead")
    if src_dt != dst_dt and not (src_dt in FLOATS and dst_dt in FLOATS):
        raise IllegalCommandError(
            f"RED_ACCUMULATE does not convert {src_dt.name} -> {dst_dt.name}: only float types accumulate "
            "into other float types; cast with SIMD_CAST first")
    if op in _INT_ONLY and dst_dt in FLOATS:
        raise IllegalCommandError(f"RED_ACCUMULATE {op.name} needs an integer type, got {dst_dt.name}; "
                                  "use SUM, MAX, MIN or PROD for floats")
    return src_dt, dst_dt


def _combine_fn(op: ReduceOp, is_float: bool, propagate_nan: bool) -> np.ufunc:
    if op == ReduceOp.SUM:
        return np.add
    if op == ReduceOp.PROD:
        return np.multiply
    if op in (ReduceOp.MAX, ReduceOp.MIN):
        if is_float and not propagate_nan:
            return np.fmax if op == ReduceOp.MAX else np.fmin
        return np.maximum if op == ReduceOp.MAX else np.minimum
    return {ReduceOp.AND: np.bitwise_and, ReduceOp.OR: np.bitwise_or, ReduceOp.XOR: np.bitwise_xor}[op]


def may_alias(shape: tuple[int, ...], strides: list[int]) -> bool:
    """Can two indices of the operand name the same element? (False is exact; True may be cautious.)"""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides, strict=True) if n > 1)
    span = 1  # elements covered by the inner dims
    for s, n in dims:
        if s < span:
            return True
        span = s * (n - 1) + span
    return False


def _element_offsets(shape: tuple[int, ...], strides: list[int]) -> np.ndarray:
    """Element offset of every index (C order) from index (0, 0, 0, 0)."""
    offs = np.zeros(shape, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides, strict=True)):
        if n > 1 and s:
            idx = [1, 1, 1, 1]
            idx[axis] = n
            offs += (np.arange(n, dtype=np.int64) * s).reshape(idx)
    return offs.reshape(-1)


def red_accumulate(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    op = _subop(desc)
    src_dt, dst_dt = _dtypes(desc, op)
    region = mem.resolve(desc.src0, 1, pe)
    if region is not None and region.level != MemLevel.LOCAL:
        raise IllegalCommandError(
            f"RED_ACCUMULATE src0 {desc.src0:#x} is in {region.level.value} memory; it must be in this PE's "
            "local store (LOCAL_BASE + offset): copy the partial there with DMA_COPY first",
            address=desc.src0)
    unsigned = bool(desc.flags & Flags.UNSIGNED)
    tally = Tally(mem, pe)
    src = tally.view("src0", desc.src0, src_dt, shape, desc.src0_stride, write=False)
    old_view = tally.view("dst", desc.dst, dst_dt, shape, desc.dst_stride, write=False)
    dst = tally.view("dst", desc.dst, dst_dt, shape, desc.dst_stride, write=True)
    ctype = np.result_type(compute_dtype(src_dt, unsigned), compute_dtype(dst_dt, unsigned))
    values = np.asarray(dtypes.load(src, src_dt, unsigned)).astype(ctype)
    old = np.asarray(dtypes.load(old_view, dst_dt, unsigned)).astype(ctype)
    fn = _combine_fn(op, dst_dt in FLOATS, bool(desc.flags & Flags.PROPAGATE_NAN))
    if not may_alias(shape, desc.dst_stride):
        new = fn(old, values)
    else:  # several indices name one dst element: each receives all of its sources, in index order
        offsets = _element_offsets(shape, desc.dst_stride)
        _, first, inverse = np.unique(offsets, return_index=True, return_inverse=True)
        acc = old.reshape(-1)[first]
        fn.at(acc, inverse.reshape(-1), values.reshape(-1))
        new = acc[inverse.reshape(-1)].reshape(shape)
    dst[...] = convert(new, dst_dt, unsigned_src=unsigned)
    n = math.prod(shape)
    return tally.event(desc, n, flops=n, dtype_bytes=np_dtype(src_dt).itemsize)
