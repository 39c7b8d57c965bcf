"""Tensor descriptors (block DMA with bounds), tl.gather and tl.histogram (DMA through address
tensors into the local store)."""

from __future__ import annotations

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I1, I64, Word
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat, TensorDescriptor
from lowering.errors import LoweringError, UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import ITEMSIZE, AtomicOp, CmpOp, DType, Flags, Op, SimdOp, UnitMask

_I64X3 = (DType.I64, DType.I64, DType.I64)


@rule("tt.make_tensor_descriptor")
def _make_descriptor(ctx: KernelLowering, op: Operation) -> None:
    ops = list(op.operands)
    rank = (len(ops) - 1) // 2
    base = ctx.scalar(ops[0])
    ctx.env[id(op.results[0])] = TensorDescriptor(
        base,
        [ctx.i64(ctx.scalar(v)) for v in ops[1 : 1 + rank]],
        [ctx.i64(ctx.scalar(v)) for v in ops[1 + rank :]],
    )


def _descriptor(ctx: KernelLowering, op: Operation) -> TensorDescriptor:
    d = ctx.lookup(op.operands[0])
    if not isinstance(d, TensorDescriptor):
        raise LoweringError("tensor descriptor operand was not built by tt.make_tensor_descriptor")
    return d


def _box(
    ctx: KernelLowering, d: TensorDescriptor, offsets: list[ir.Value], block: tuple[int, ...], dtype: DType
) -> tuple[ir.Value, list[ir.Value], ir.Value]:
    """(start address, valid bounds, empty?) of the block at `offsets` of descriptor `d`."""
    b = ctx.b
    addr = ctx.i64(d.base)
    valid: list[ir.Value] = []
    empty: ir.Value = I1(0)
    for off, size, stride, n in zip(offsets, d.shape, d.strides, block, strict=True):
        o = ctx.i64(off)
        addr = b.add(addr, b.mul(b.mul(o, stride), I64(ITEMSIZE[dtype])))
        v = b.sub(size, o)
        empty = b.or_(empty, b.icmp_signed("<=", v, I64(0)))
        valid.append(b.select(b.icmp_signed(">", v, I64(n)), I64(n), v))
    return addr, valid, empty


@rule("tt.descriptor_load")
def _descriptor_load(ctx: KernelLowering, op: Operation) -> None:
    d = _descriptor(ctx, op)
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    shape = tuple(res.shape)
    if len(shape) != len(d.shape):
        raise UnsupportedError("descriptor loads of a lower rank than the descriptor")
    addr, valid, empty = _box(ctx, d, [ctx.scalar(v) for v in op.operands[1:]], shape, dtype)
    dst = ctx.new_buf(res, shape, dtype)
    b = ctx.b
    with b.if_else(empty) as (then, otherwise):
        with then:
            ctx.command(
                Op.SIMD_FILL, shape=shape, dst=dst, dtypes=(dtype,), imm0=0, flags=ctx.imm_flags(dtype)
            )
        with otherwise:
            ctx.command(
                Op.DMA_COPY,
                shape=shape,
                dst=dst,
                srcs=((addr, d.strides),),
                dtypes=(dtype, dtype),
                valid=valid,
                flags=ctx.imm_flags(dtype),
            )
    ctx.bind(res, dst)


@rule("tt.descriptor_store")
def _descriptor_store(ctx: KernelLowering, op: Operation) -> None:
    d = _descriptor(ctx, op)
    src = ctx.buf(op.operands[1])
    shape = src.shape
    if len(shape) != len(d.shape):
        raise UnsupportedError("descriptor stores of a lower rank than the descriptor")
    addr, valid, empty = _box(ctx, d, [ctx.scalar(v) for v in op.operands[2:]], shape, src.dtype)
    with ctx.b.if_then(ctx.b.not_(empty)):
        ctx.command(
            Op.DMA_COPY,
            shape=shape,
            dst=(addr, d.strides),
            srcs=(src,),
            dtypes=(src.dtype, src.dtype),
            valid=valid,
        )


def _addresses(
    ctx: KernelLowering, shape: tuple[int, ...], parts: list[tuple[Buf | None, int]], base: Word
) -> Buf:
    """I64 tensor base + sum_k part_k * scale_k; a None part is the index along dim k (iota)."""
    addrs = ctx.new_buf(None, shape, DType.I64)
    tmp = ctx.new_buf(None, shape, DType.I64)
    ctx.command(Op.SIMD_FILL, shape=shape, dst=addrs, dtypes=(DType.I64,), imm0=base, flags=Flags.IMM_IS_INT)
    rank = len(shape)
    for k, (src, scale) in enumerate(parts):
        if scale == 0:
            continue
        if src is None:
            ctx.command(
                Op.SIMD_IOTA,
                shape=shape,
                dst=tmp,
                dtypes=(DType.I64,),
                subop=4 - rank + k,
                flags=Flags.IMM_IS_INT,
            )
        else:
            ctx.command(Op.SIMD_CAST, shape=shape, dst=tmp, srcs=(src,), dtypes=(DType.I64, src.dtype))
        ctx.command(
            Op.SIMD_BINARY,
            shape=shape,
            dst=tmp,
            srcs=(tmp,),
            dtypes=_I64X3,
            subop=SimdOp.MUL,
            flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
            imm1=scale,
        )
        ctx.command(
            Op.SIMD_BINARY, shape=shape, dst=addrs, srcs=(addrs, tmp), dtypes=_I64X3, subop=SimdOp.ADD
        )
    return addrs


@rule("tt.gather")
def _gather(ctx: KernelLowering, op: Operation) -> None:
    src_v, idx_v = op.operands
    res = op.results[0]
    axis = int(op.attr("axis"))
    dtype = dt.to_dtype(res.type)
    shape = tuple(res.shape)
    src = ctx.tensor(src_v)
    if isinstance(src, Splat):
        ctx.bind(res, Splat(src.scalar, shape, dtype))
        return
    if src.dyn_base is not None:
        src = ctx.buf(src_v)
    idx = ctx.buf(idx_v)
    size = ITEMSIZE[dtype]
    parts: list[tuple[Buf | None, int]] = [
        (idx if k == axis else None, src.strides[k] * size) for k in range(len(shape))
    ]
    base = ctx.local_addr(src)
    addrs = _addresses(ctx, shape, parts, base)
    dst = ctx.new_buf(res, shape, dtype)
    ctx.command(
        Op.DMA_GATHER,
        shape=shape,
        dst=dst,
        srcs=(None, addrs.view(shape, addrs.strides, DType.U64)),
        dtypes=(dtype, dtype),
    )
    ctx.bind(res, dst)


@rule("tt.histogram")
def _histogram(ctx: KernelLowering, op: Operation) -> None:
    x_v = op.operands[0]
    res = op.results[0]
    bins = res.shape[0]
    x = ctx.buf(x_v)
    shape = x.shape
    out = ctx.new_buf(res, (bins,), DType.I32)
    ctx.command(Op.SIMD_FILL, shape=(bins,), dst=out, dtypes=(DType.I32,), imm0=0, flags=Flags.IMM_IS_INT)
    addrs = _addresses(ctx, shape, [(x, 4)], ctx.local_addr(out))
    in_range = ctx.new_buf(None, shape, DType.I1)
    below = ctx.new_buf(None, shape, DType.I1)
    xd = x.dtype
    ctx.command(
        Op.SIMD_CMP,
        shape=shape,
        dst=in_range,
        srcs=(x,),
        dtypes=(DType.I1, xd, xd),
        subop=CmpOp.GE,
        flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
        imm1=0,
    )
    ctx.command(
        Op.SIMD_CMP,
        shape=shape,
        dst=below,
        srcs=(x,),
        dtypes=(DType.I1, xd, xd),
        subop=CmpOp.LT,
        flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
        imm1=bins,
    )
    ctx.command(
        Op.SIMD_BINARY,
        shape=shape,
        dst=in_range,
        srcs=(in_range, below),
        dtypes=(DType.I1, DType.I1, DType.I1),
        subop=SimdOp.AND,
    )
    if len(op.operands) > 1:
        m = ctx.buf(op.operands[1])
        ctx.command(
            Op.SIMD_BINARY,
            shape=shape,
            dst=in_range,
            srcs=(in_range, m),
            dtypes=(DType.I1, DType.I1, DType.I1),
            subop=SimdOp.AND,
        )
    one = ctx.materialize(Splat(ir.IntType(32)(1), shape, DType.I32))
    ctx.command(
        Op.DMA_ATOMIC,
        shape=shape,
        srcs=(one, addrs.view(shape, addrs.strides, DType.U64), in_range),
        dtypes=(DType.I32, DType.I32),
        subop=AtomicOp.ADD,
        flags=Flags.IMM_IS_INT,
    )
    ctx.em.fence(UnitMask.DMA)  # the atomics write the local store through addresses
    ctx.bind(res, out)
