"""Reduction engine: reduce or scan one axis of the 4-D index space; accumulate across PEs
(RED_ACCUMULATE, in `red_accumulate.py`)."""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import CommandDescriptor, DType, Flags, Op, ReduceOp, ScanOp
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dtypes
from mtia_sim.units.dtypes import compute_dtype, convert
from mtia_sim.units.operand import Tally, check_shape
from mtia_sim.units.red_accumulate import red_accumulate

_SubOp = TypeVar("_SubOp", ReduceOp, ScanOp)


def _axis(desc: CommandDescriptor) -> int:
    if not 0 <= desc.axis < 4:
        raise IllegalCommandError(f"{desc.op.name}: axis must be 0..3, got {desc.axis}")
    return int(desc.axis)


def _subop(desc: CommandDescriptor, kind: type[_SubOp]) -> _SubOp:
    """The command's `subop` as a `ReduceOp`/`ScanOp`."""
    try:
        return kind(desc.subop)
    except ValueError:
        raise IllegalCommandError(f"{desc.op.name}: unknown {kind.__name__} {desc.subop}") from None


def _source(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...]) -> tuple[np.ndarray, DType]:
    """The source operand in the type arithmetic is done in (i1 as uint8), and its storage type."""
    dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    v = tally.view("src0", desc.src0, dt, shape, desc.src0_stride, write=False)
    unsigned = bool(desc.flags & Flags.UNSIGNED)
    return dtypes.load(v, dt, unsigned).astype(compute_dtype(dt, unsigned)), dt


def _store(
    desc: CommandDescriptor, tally: Tally, r: np.ndarray, out_shape: tuple[int, ...], strides: list[int]
) -> None:
    dst = tally.view("dst", desc.dst, desc.dtype_out, out_shape, strides, write=True)
    dst[...] = convert(r, desc.dtype_out, unsigned_src=bool(desc.flags & Flags.UNSIGNED))


def _event(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...], dt: DType) -> CommandEvent:
    """One operation per source element."""
    n = math.prod(shape)
    return tally.event(desc, n, flops=n, dtype_bytes=dtypes.np_dtype(dt).itemsize)


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
    op = _subop(desc, ReduceOp)
    tally = Tally(mem, pe)
    x, dt = _source(desc, tally, shape)
    r = _reduce(x, op, axis, dt, bool(desc.flags & Flags.PROPAGATE_NAN))
    out_shape = list(shape)
    out_shape[axis] = 1
    strides = list(desc.dst_stride)
    strides[axis] = 0
    _store(desc, tally, r, tuple(out_shape), strides)
    return _event(desc, tally, shape, dt)


def red_scan(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    axis = _axis(desc)
    op = _subop(desc, ScanOp)
    tally = Tally(mem, pe)
    x, dt = _source(desc, tally, shape)
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
    _store(desc, tally, r, shape, desc.dst_stride)
    return _event(desc, tally, shape, dt)


HANDLERS = {Op.RED_REDUCE: red_reduce, Op.RED_SCAN: red_scan, Op.RED_ACCUMULATE: red_accumulate}


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    return HANDLERS[desc.op](desc, mem, pe)
