"""Reduction engine: reduce or scan one axis of the 4-D index space; accumulate across PEs
(RED_ACCUMULATE, in `red_accumulate.py`)."""

from __future__ import annotations

import math

import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, DType, Flags, Op, ReduceOp, ScanOp
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dtypes
from mtia_sim.units.dtypes import compute_dtype, convert
from mtia_sim.units.operand import Tally, check_shape
from mtia_sim.units.red_accumulate import red_accumulate


def _axis(desc: CommandDescriptor) -> int:
    if not 0 <= desc.axis < 4:
        raise IllegalCommandError(f"{desc.op.name}: axis must be 0..3, got {desc.axis}")
    return int(desc.axis)


def _source(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...]) -> tuple[np.ndarray, DType]:
    dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    v = tally.view("src0", desc.src0, dt, shape, desc.src0_stride, write=False)
    return dtypes.load(v, dt, bool(desc.flags & Flags.UNSIGNED)), dt


def _reduce(x: np.ndarray, op: ReduceOp, axis: int, dt: DType, propagate_nan: bool) -> np.ndarray:
    if op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
        if x.dtype.kind == "f" and not propagate_nan:
            fill = -np.inf if op == ReduceOp.ARGMAX else np.inf
            x = np.where(np.isnan(x), fill, x)
        if op == ReduceOp.ARGMAX:
            return np.argmax(x, axis=axis, keepdims=True)
        return np.argmin(x, axis=axis, keepdims=True)
    if op in (ReduceOp.AND, ReduceOp.OR, ReduceOp.XOR):
        if x.dtype.kind == "f":
            raise IllegalCommandError(f"RED_REDUCE {op.name} needs an integer type, got {dt.name}")
        ufunc = {ReduceOp.AND: np.bitwise_and, ReduceOp.OR: np.bitwise_or, ReduceOp.XOR: np.bitwise_xor}[op]
        return ufunc.reduce(x, axis=axis, keepdims=True)
    if op == ReduceOp.SUM:
        return np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
    if op == ReduceOp.PROD:
        return np.prod(x, axis=axis, keepdims=True, dtype=x.dtype)
    fn: np.ufunc
    if x.dtype.kind == "f" and not propagate_nan:
        fn = np.fmax if op == ReduceOp.MAX else np.fmin
    else:
        fn = np.maximum if op == ReduceOp.MAX else np.minimum
    return fn.reduce(x, axis=axis, keepdims=True)


def red_reduce(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    axis = _axis(desc)
    try:
        op = ReduceOp(desc.subop)
    except ValueError:
        raise IllegalCommandError(f"RED_REDUCE: unknown ReduceOp {desc.subop}") from None
    tally = Tally(mem, pe)
    x, dt = _source(desc, tally, shape)
    unsigned = bool(desc.flags & Flags.UNSIGNED)
    if x.dtype != np.bool_:
        x = x.astype(compute_dtype(dt, unsigned) if dt != DType.I1 else np.uint8)
    else:
        x = x.astype(np.uint8)
    r = _reduce(x, op, axis, dt, bool(desc.flags & Flags.PROPAGATE_NAN))
    out_shape = list(shape)
    out_shape[axis] = 1
    strides = list(desc.dst_stride)
    strides[axis] = 0
    dst = tally.view("dst", desc.dst, desc.dtype_out, tuple(out_shape), strides, write=True)
    dst[...] = convert(r, desc.dtype_out, unsigned_src=unsigned)
    n = math.prod(shape)
    return tally.event(desc, n, flops=n, dtype_bytes=dtypes.np_dtype(dt).itemsize)


def red_scan(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    axis = _axis(desc)
    try:
        op = ScanOp(desc.subop)
    except ValueError:
        raise IllegalCommandError(f"RED_SCAN: unknown ScanOp {desc.subop}") from None
    tally = Tally(mem, pe)
    x, dt = _source(desc, tally, shape)
    unsigned = bool(desc.flags & Flags.UNSIGNED)
    x = np.asarray(x).astype(compute_dtype(dt, unsigned) if dt != DType.I1 else np.uint8)
    rev = bool(desc.flags & Flags.REVERSE)
    if rev:
        x = np.flip(x, axis)
    if op == ScanOp.SUM:
        r = np.cumsum(x, axis=axis, dtype=x.dtype)
    elif op == ScanOp.PROD:
        r = np.cumprod(x, axis=axis, dtype=x.dtype)
    elif op == ScanOp.MAX:
        r = np.maximum.accumulate(x, axis=axis)
    else:
        r = np.minimum.accumulate(x, axis=axis)
    if rev:
        r = np.flip(r, axis)
    dst = tally.view("dst", desc.dst, desc.dtype_out, shape, desc.dst_stride, write=True)
    dst[...] = convert(r, desc.dtype_out, unsigned_src=unsigned)
    n = math.prod(shape)
    return tally.event(desc, n, flops=n, dtype_bytes=dtypes.np_dtype(dt).itemsize)


HANDLERS = {Op.RED_REDUCE: red_reduce, Op.RED_SCAN: red_scan, Op.RED_ACCUMULATE: red_accumulate}


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    return HANDLERS[desc.op](desc, mem, pe)
