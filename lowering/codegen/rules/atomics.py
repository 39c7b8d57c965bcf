"""Atomics (`tt.atomic_rmw`, `tt.atomic_cas`): one RED_ACCUMULATE on the reduction network when the
result is unused and the passes allow it (affine blocks or scalar pointers), DMA_ATOMIC otherwise."""

from __future__ import annotations

from llvmlite import ir

from lowering.analysis.accumulate import accumulate_form
from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I64
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.memory import sexpr, valid_box
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from lowering.passes.pointer_forms import BlockAccess
from mtia_sim.isa import ITEMSIZE, AtomicOp, DType, Flags, Op

_RMW = {
    "add": AtomicOp.ADD,
    "fadd": AtomicOp.ADD,
    "max": AtomicOp.MAX,
    "min": AtomicOp.MIN,
    "umax": AtomicOp.MAX,
    "umin": AtomicOp.MIN,
    "exch": AtomicOp.XCHG,
    "xchg": AtomicOp.XCHG,
    "and": AtomicOp.AND,
    "or": AtomicOp.OR,
    "xor": AtomicOp.XOR,
}


def _as_buf(ctx: KernelLowering, v: object, shape: tuple[int, ...], dtype: DType) -> Buf:
    if isinstance(v, ir.Value):
        one = ctx.new_buf(None, (1,), dtype)
        ctx.fill(one, v, dtype)
        return one.view(shape, tuple(0 for _ in shape))
    if isinstance(v, Splat):
        return ctx.materialize(v)
    assert isinstance(v, Buf)
    return v


def _accumulate(ctx: KernelLowering, op: Operation) -> bool:
    """Issue an atomic whose result is unused as one RED_ACCUMULATE (reduction network) when the
    passes allow it (`lowering.analysis.accumulate`); False keeps the DMA_ATOMIC path. Blocks follow
    the plan (pointer analysis records an access only for them); scalars follow `red_accumulate`."""
    form = accumulate_form(op)
    if form is None:
        return False
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    flags = int(form.flags)
    if res.type.is_tensor:
        acc = ctx.plan.pointers.access(op)
        if acc is None:
            return False
        _accumulate_block(ctx, op, acc, int(form.subop), flags, dtype)
    elif getattr(ctx.options, "red_accumulate", True):
        _accumulate_scalar(ctx, op, int(form.subop), flags, dtype)
    else:
        return False
    ctx.accumulated = True
    shape = tuple(res.type.shape) if res.type.is_tensor else ()
    zero = dt.core_type(res.type)(0)
    ctx.bind(res, Splat(zero, shape, dtype) if shape else zero)
    return True


def _accumulate_block(
    ctx: KernelLowering, op: Operation, acc: BlockAccess, subop: int, flags: int, dtype: DType
) -> None:
    """dst block (affine pointers) op= values; a box mask shrinks the index space to the box (it
    starts at index 0 in every dim), an empty box skips the command."""
    b = ctx.b
    shape = tuple(op.results[0].type.shape)
    src = _as_buf(ctx, ctx.tensor(op.operands[1]), shape, dtype)
    base = b.add(ctx.i64(ctx.scalar(acc.base)), b.mul(sexpr(ctx, acc.offset), I64(ITEMSIZE[dtype])))
    strides = [sexpr(ctx, s) for s in acc.strides]
    valid, empty = valid_box(ctx, acc, shape)

    def issue() -> None:
        ctx.command(
            Op.RED_ACCUMULATE,
            shape=valid or shape,
            dst=(base, strides),
            srcs=(src,),
            dtypes=(dtype, src.dtype),
            subop=subop,
            flags=flags,
        )

    if acc.mask is None:
        issue()
    else:
        with b.if_then(b.not_(empty)):
            issue()


def _accumulate_scalar(ctx: KernelLowering, op: Operation, subop: int, flags: int, dtype: DType) -> None:
    """*ptr op= value for a scalar pointer (e.g. `tl.atomic_add(out, tl.sum(x))`): a unit-produced
    value goes from its local-store slot without a fence."""
    ptr = ctx.scalar(op.operands[0])
    d = ctx.deferred(op.operands[1])
    if d is not None and d.buf.dtype == dtype:
        src = d.buf.view((1,), (0,))
    else:
        src = _as_buf(ctx, ctx.scalar(op.operands[1]), (1,), dtype)
    mask = ctx.scalar(op.operands[2]) if len(op.operands) > 2 else None

    def issue() -> None:
        ctx.command(
            Op.RED_ACCUMULATE,
            shape=(1,),
            dst=(ptr, [0]),
            srcs=(src,),
            dtypes=(dtype, src.dtype),
            subop=subop,
            flags=flags,
        )

    if mask is None:
        issue()
    else:
        with ctx.b.if_then(mask):
            issue()


@rule("tt.atomic_rmw", "tt.atomic_cas")
def _atomic(ctx: KernelLowering, op: Operation) -> None:
    if op.name == "tt.atomic_rmw" and _accumulate(ctx, op):
        return
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    is_cas = op.name == "tt.atomic_cas"
    if is_cas:
        sub, flags = AtomicOp.CAS, 0
    else:
        kind = str(op.attr("atomic_rmw_op", "add")).lower()
        if kind not in _RMW:
            raise UnsupportedError(f"atomic operation {kind!r}")
        sub, flags = _RMW[kind], (Flags.UNSIGNED if kind in ("umax", "umin") else 0)
    scalar = not res.type.is_tensor
    shape = (1,) if scalar else tuple(res.shape)

    def get(i: int, d: DType) -> Buf:
        v = op.operands[i]
        x = ctx.scalar_operand(v, shape, d) if scalar else ctx.tensor(v)
        return _as_buf(ctx, x, shape, d)

    addrs = get(0, DType.U64)
    if is_cas:
        cmp_v = op.operands[1]
        cmp = ctx.scalar(cmp_v) if scalar else ctx.tensor(cmp_v)
        if not scalar and not isinstance(cmp, Splat):
            raise UnsupportedError("tl.atomic_cas with a per-element compare value")
        cmp_scalar = cmp if scalar else cmp.scalar  # type: ignore[union-attr]
        vals = get(2, dtype)
        mask = None
        imm0: ir.Value | int = ctx.imm(cmp_scalar, dtype)  # type: ignore[arg-type]
    else:
        vals = get(1, dtype)
        mask = get(2, DType.I1) if len(op.operands) > 2 else None
        imm0 = 0
    used = bool(res.uses)
    dst = ctx.new_buf(None if scalar else res, shape, dtype) if used else None
    ctx.command(
        Op.DMA_ATOMIC,
        shape=shape,
        dst=dst,
        srcs=(vals, addrs, mask),
        dtypes=(dtype, dtype),
        subop=sub,
        flags=flags | ctx.imm_flags(dtype),
        imm0=imm0,
    )
    if scalar:
        ctx.bind(
            res,
            ctx.read_scalar(dst, dt.core_type(res.type)) if dst is not None else dt.core_type(res.type)(0),
        )
    elif dst is not None:
        ctx.bind(res, dst)
    else:
        ctx.bind(res, Splat(dt.core_type(res.type)(0), shape, dtype))
