"""Constants: scalars are LLVM constants, uniform tensors stay splats (immediates), other dense
constants are written into the local store by the core."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I64
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Splat
from lowering.errors import UnsupportedError
from lowering.ir.attributes import DenseAttr
from lowering.ir.core import Operation
from mtia_sim.isa import DType


# -- constants -----------------------------------------------------------------------------------
def scalar_constant(ty: ir.Type, value: object) -> ir.Value:
    if isinstance(ty, ir.IntType):
        v = int(bool(value)) if isinstance(value, bool | np.bool_) else int(value)  # type: ignore[call-overload]
        return ty(v & ((1 << ty.width) - 1) if ty.width > 1 else v & 1)
    return ty(float(value))  # type: ignore[arg-type]


@rule("arith.constant")
def _constant(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    value = op.attr("value")
    ty = dt.core_type(res.type)
    if not res.type.is_tensor:
        ctx.bind(res, scalar_constant(ty, value))
        return
    dtype = dt.to_dtype(res.type)
    if isinstance(value, DenseAttr):
        arr = np.asarray(value.value)
        if arr.size == 0 or (arr == arr.flat[0]).all():
            ctx.bind(res, Splat(scalar_constant(ty, arr.flat[0] if arr.size else 0), tuple(res.shape), dtype))
            return
        _dense_constant(ctx, op, np.broadcast_to(arr, tuple(res.shape)), dtype)
        return
    ctx.bind(res, Splat(scalar_constant(ty, value), tuple(res.shape), dtype))


def _dense_constant(ctx: KernelLowering, op: Operation, arr: np.ndarray, dtype: DType) -> None:
    """A non-uniform constant tensor: the core writes it into the local store element by element."""
    from mtia_sim.isa import UnitMask

    res = op.results[0]
    if arr.size > 4096:
        raise UnsupportedError(
            f"non-uniform constant tensor of {arr.size} elements",
            hint="build it with tl.arange / tl.where instead",
        )
    dst = ctx.new_buf(res, tuple(res.shape), dtype)
    ctx.em.fence(UnitMask.ALL)
    b = ctx.b
    flat = arr.reshape(-1)
    from mtia_sim.units.dtypes import np_dtype

    raw = np.ascontiguousarray(flat.astype(np_dtype(dtype))).view(np.uint8)
    base = ctx.local_addr(dst)
    for i in range(0, len(raw), 8):
        chunk = bytes(raw[i : i + 8]) + b"\0" * (8 - len(raw[i : i + 8]))
        word = int.from_bytes(chunk, "little")
        addr = I64(base + i) if isinstance(base, int) else b.add(base, I64(i))
        b.store(I64(word), b.inttoptr(addr, I64.as_pointer()))
    ctx.bind(res, dst)
