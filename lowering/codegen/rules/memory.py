"""Loads and stores: block DMA for affine accesses, row gathers for indirect rows of contiguous
columns, gather/scatter otherwise, plain core loads/stores for scalar pointers. Atomics are in
`rules.atomics`, which shares `sexpr` and `valid_box` from here."""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I1, I64
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from lowering.passes.pointer_forms import BlockAccess, RowAccess, SExpr
from mtia_sim.isa import ITEMSIZE, DType, Flags, GatherForm, Op, SimdOp, UnitMask

isa_itemsize = ITEMSIZE.__getitem__


def sexpr(ctx: KernelLowering, e: SExpr) -> ir.Value:
    """Evaluate a pointer-analysis scalar expression on the core (as i64)."""
    kind = e[0]
    if kind == "c":
        return I64(int(e[1]))
    if kind == "v":
        return ctx.i64(ctx.scalar(e[1]))
    if kind == "carry":
        return ctx.b.load(ctx.carry_slots[id(e[1])])
    a, b = sexpr(ctx, e[1]), sexpr(ctx, e[2])
    bld = ctx.b
    return {"add": bld.add, "sub": bld.sub, "mul": bld.mul}[kind](a, b)


def _cond(ctx: KernelLowering, c: SExpr) -> ir.Value:
    if c[0] == "lt0":
        return ctx.b.icmp_signed("<", sexpr(ctx, c[1]), I64(0))
    return ctx.scalar(c[1])


def _other_imm(ctx: KernelLowering, op: Operation, dtype: DType) -> tuple[ir.Value | int, int]:
    if op.name != "tt.load" or len(op.operands) < 3:
        return 0, ctx.imm_flags(dtype)
    other = ctx.tensor(op.operands[2])
    if not isinstance(other, Splat):
        raise UnsupportedError("tt.load with a non-uniform `other` in a block access")
    return ctx.imm(other.scalar, dtype), ctx.imm_flags(dtype)


def _block_access(ctx: KernelLowering, op: Operation, acc: BlockAccess) -> None:
    b = ctx.b
    is_load = op.name == "tt.load"
    val_type = op.results[0].type if is_load else op.operands[1].type
    dtype = dt.to_dtype(val_type)
    size = ITEMSIZE[dtype]
    shape = tuple(val_type.shape)
    base = b.add(ctx.i64(ctx.scalar(acc.base)), b.mul(sexpr(ctx, acc.offset), I64(size)))
    strides = [sexpr(ctx, s) for s in acc.strides]
    valid, empty = valid_box(ctx, acc, shape)
    mask_buf = None
    if acc.mask_tensor:
        mask_buf = ctx.buf(op.operands[1 if is_load else 2])
    if is_load:
        res = op.results[0]
        dst = _load_dst(ctx, op, res, dtype)
        imm0, flags = _other_imm(ctx, op, dtype)

        def issue() -> None:
            ctx.command(
                Op.DMA_COPY,
                shape=shape,
                dst=dst,
                srcs=(((base, strides)), None, mask_buf),
                dtypes=(dtype, dtype),
                valid=valid or None,
                imm0=imm0,
                flags=flags,
            )

        if acc.mask is None:
            issue()
        else:
            with b.if_else(empty) as (then, otherwise):
                with then:
                    ctx.command(Op.SIMD_FILL, shape=shape, dst=dst, dtypes=(dtype,), imm0=imm0, flags=flags)
                with otherwise:
                    issue()
        ctx.bind(res, dst)
    else:
        src = ctx.buf(op.operands[1])

        def issue_store() -> None:
            ctx.command(
                Op.DMA_COPY,
                shape=shape,
                dst=(base, strides),
                srcs=(src, None, mask_buf),
                dtypes=(dtype, src.dtype),
                valid=valid or None,
            )

        if acc.mask is None:
            issue_store()
        else:
            with b.if_then(b.not_(empty)):
                issue_store()


def valid_box(
    ctx: KernelLowering, acc: BlockAccess | RowAccess, shape: tuple[int, ...]
) -> tuple[list[ir.Value | int], ir.Value]:
    """The mask box of a block access as per-dim valid sizes (clamped to the shape; [] without a
    mask) and an i1 that is true when the box is empty."""
    b = ctx.b
    valid: list[ir.Value | int] = []
    empty: ir.Value = I1(0)
    if acc.mask is None:
        return valid, empty
    for k, bounds in enumerate(acc.mask.bounds):
        if not bounds:
            valid.append(shape[k])
            continue
        v = sexpr(ctx, bounds[0])
        for extra in bounds[1:]:
            e = sexpr(ctx, extra)
            v = b.select(b.icmp_signed("<", e, v), e, v)
        empty = b.or_(empty, b.icmp_signed("<=", v, I64(0)))
        v = b.select(b.icmp_signed(">", v, I64(shape[k])), I64(shape[k]), v)
        valid.append(v)
    for c in acc.mask.conds:
        empty = b.or_(empty, b.not_(_cond(ctx, c)))
    return valid, empty


def _load_dst(ctx: KernelLowering, op: Operation, res: Any, dtype: DType) -> Buf:
    ring = ctx.rings.get(id(op))
    if ring is None:
        return ctx.new_buf(res, tuple(res.shape), dtype)
    buffer, nbytes, depth, counter = ring
    slot = ctx.b.urem(ctx.b.load(counter), I64(depth))
    return ctx.ring_view(buffer, nbytes, slot, tuple(res.shape), dtype)


def _scalar_access(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.b
    is_load = op.name == "tt.load"
    ptr = ctx.scalar(op.operands[0])
    val_type = op.results[0].type if is_load else op.operands[1].type
    dtype = dt.to_dtype(val_type)
    mask_index = 1 if is_load else 2
    mask = ctx.scalar(op.operands[mask_index]) if len(op.operands) > mask_index else None
    if not is_load:
        d = ctx.deferred(op.operands[1])
        if d is not None and isa_itemsize(d.buf.dtype) == isa_itemsize(dtype):
            # a unit-produced scalar goes out by DMA: no fence, the core never waits for it
            def issue() -> None:
                ctx.command(
                    Op.DMA_COPY,
                    shape=(1,),
                    dst=(ptr, [0]),
                    srcs=(d.buf.view((1,), (0,)),),
                    dtypes=(dtype, d.buf.dtype),
                )

            if mask is None:
                issue()
            else:
                with b.if_then(mask):
                    issue()
            return
    if dtype in (DType.F16, DType.BF16):
        _scalar_half(ctx, op, ptr, dtype, mask)
        return
    core_ty = dt.core_type(val_type)
    mem_ty = ir.IntType(8) if dtype == DType.I1 else core_ty
    addr = b.inttoptr(ptr, mem_ty.as_pointer())
    # order against earlier DMA (and reduction-network accumulates) to the same memory
    ctx.em.fence(UnitMask.DMA | (UnitMask.RED if ctx.accumulated else 0))
    if is_load:
        other = ctx.scalar(op.operands[2]) if len(op.operands) > 2 else core_ty(0)
        if mask is None:
            val = b.load(addr)
        else:
            slot = ctx.alloca(mem_ty)
            b.store(other if mem_ty == core_ty else b.zext(other, mem_ty), slot)
            with b.if_then(mask):
                b.store(b.load(addr), slot)
            val = b.load(slot)
        if mem_ty != core_ty:
            val = b.icmp_unsigned("!=", val, mem_ty(0))
        ctx.bind(op.results[0], val)
    else:
        val = ctx.scalar(op.operands[1])
        if mem_ty != core_ty:
            val = b.zext(val, mem_ty)
        if mask is None:
            b.store(val, addr)
        else:
            with b.if_then(mask):
                b.store(val, addr)


def _scalar_half(
    ctx: KernelLowering, op: Operation, ptr: ir.Value, dtype: DType, mask: ir.Value | None
) -> None:
    """fp16/bf16 scalars live as f32 on the core: convert on the SIMD engine through the local store."""
    b = ctx.b
    if op.name == "tt.load":
        one = ctx.new_buf(None, (1,), dtype)
        other = ctx.scalar(op.operands[2]) if len(op.operands) > 2 else ir.FloatType()(0.0)
        ctx.fill(one, other, dtype)
        if mask is None:
            ctx.command(Op.DMA_COPY, shape=(1,), dst=one, srcs=((ptr, [0]),), dtypes=(dtype, dtype))
        else:
            with b.if_then(mask):
                ctx.command(Op.DMA_COPY, shape=(1,), dst=one, srcs=((ptr, [0]),), dtypes=(dtype, dtype))
        ctx.bind(op.results[0], ctx.read_scalar(one, ir.FloatType()))
        return
    one = ctx.new_buf(None, (1,), dtype)
    ctx.fill(one, ctx.scalar(op.operands[1]), dtype)
    if mask is None:
        ctx.command(Op.DMA_COPY, shape=(1,), dst=(ptr, [0]), srcs=(one,), dtypes=(dtype, dtype))
    else:
        with b.if_then(mask):
            ctx.command(Op.DMA_COPY, shape=(1,), dst=(ptr, [0]), srcs=(one,), dtypes=(dtype, dtype))


def _gather_scatter(ctx: KernelLowering, op: Operation) -> None:
    is_load = op.name == "tt.load"
    val_type = op.results[0].type if is_load else op.operands[1].type
    dtype = dt.to_dtype(val_type)
    shape = tuple(val_type.shape)
    addrs = ctx.buf(op.operands[0])
    mask_index = 1 if is_load else 2
    mask = ctx.buf(op.operands[mask_index]) if len(op.operands) > mask_index else None
    if is_load:
        res = op.results[0]
        dst = ctx.new_buf(res, shape, dtype)
        other = ctx.tensor(op.operands[2]) if len(op.operands) > 2 else None
        imm0: ir.Value | int = 0
        if isinstance(other, Splat):
            imm0 = ctx.imm(other.scalar, dtype)
        ctx.command(
            Op.DMA_GATHER,
            shape=shape,
            dst=dst,
            srcs=(None, addrs, mask),
            dtypes=(dtype, dtype),
            imm0=imm0,
            flags=ctx.imm_flags(dtype),
        )
        if isinstance(other, Buf) and mask is not None:
            ctx.command(
                Op.SIMD_SELECT,
                shape=shape,
                dst=dst,
                srcs=(mask, dst, other),
                dtypes=(dtype, DType.I1, dtype, dtype),
            )
        ctx.bind(res, dst)
    else:
        src = ctx.buf(op.operands[1])
        ctx.command(Op.DMA_SCATTER, shape=shape, srcs=(src, addrs, mask), dtypes=(dtype, dtype))


def _broadcast(buf: Buf, shape: tuple[int, ...]) -> Buf:
    """`buf` seen over `shape` (its size-1 dims repeat with stride 0)."""
    strides = tuple(
        0 if n == 1 and m != 1 else s for n, m, s in zip(buf.shape, shape, buf.strides, strict=True)
    )
    return buf.view(shape, strides)


def _row_gather(ctx: KernelLowering, op: Operation, acc: RowAccess) -> None:
    """One address per row on the SIMD unit (base + rows * itemsize), then one DMA_GATHER of
    GatherForm.ROWS over the whole tile; the mask's box becomes `valid`, its row tensor (or the
    whole mask tensor) the I1 mask with stride 0 along the row."""
    b = ctx.b
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    size = ITEMSIZE[dtype]
    shape = tuple(res.type.shape)
    row_shape = (*shape[:-1], 1)
    rows = _broadcast(ctx.buf(acc.rows), row_shape)
    rows_dtype = dt.to_dtype(acc.rows.type)
    addrs = ctx.new_buf(None, row_shape, DType.I64)
    src: Buf = rows
    if rows_dtype != DType.I64:
        ctx.command(Op.SIMD_CAST, shape=row_shape, dst=addrs, srcs=(rows,), dtypes=(DType.I64, rows_dtype))
        src = addrs
    base = b.add(ctx.i64(ctx.scalar(acc.base)), b.mul(sexpr(ctx, acc.offset), I64(size)))
    i64s = (DType.I64, DType.I64, DType.I64)
    imm = Flags.SRC1_IMM | Flags.IMM_IS_INT
    ctx.command(
        Op.SIMD_BINARY,
        shape=row_shape,
        dst=addrs,
        srcs=(src,),
        dtypes=i64s,
        subop=SimdOp.MUL,
        flags=imm,
        imm1=size,
    )
    ctx.command(
        Op.SIMD_BINARY,
        shape=row_shape,
        dst=addrs,
        srcs=(addrs,),
        dtypes=i64s,
        subop=SimdOp.ADD,
        flags=imm,
        imm1=base,
    )
    mask: Buf | None = None
    if acc.mask_tensor:
        mask = ctx.buf(op.operands[1])
    elif acc.mask is not None and acc.mask.rows is not None:
        mask = _broadcast(ctx.buf(acc.mask.rows), shape)
    valid, empty = valid_box(ctx, acc, shape)
    dst = ctx.new_buf(res, shape, dtype)
    imm0, flags = _other_imm(ctx, op, dtype)
    src1 = addrs.view(shape, (*addrs.strides[:-1], 0), DType.U64)

    def issue() -> None:
        ctx.command(
            Op.DMA_GATHER,
            shape=shape,
            dst=dst,
            srcs=(None, src1, mask),
            dtypes=(dtype, dtype),
            subop=GatherForm.ROWS,
            valid=valid or None,
            imm0=imm0,
            flags=flags,
        )

    if acc.mask is None or (not acc.mask.conds and all(not bs for bs in acc.mask.bounds)):
        issue()
    else:
        with b.if_else(empty) as (then, otherwise):
            with then:
                ctx.command(Op.SIMD_FILL, shape=shape, dst=dst, dtypes=(dtype,), imm0=imm0, flags=flags)
            with otherwise:
                issue()
    ctx.bind(res, dst)
    for v in acc.values():  # the row tensors were kept alive for this command (KernelLowering.bind)
        x = ctx.tensor(v)
        if isinstance(x, Buf):
            x.buffer.pinned -= 1
            ctx.alloc.release(x.buffer)


@rule("tt.load", "tt.store")
def _load_store(ctx: KernelLowering, op: Operation) -> None:
    if not op.operands[0].type.is_tensor:
        _scalar_access(ctx, op)
        return
    acc = ctx.plan.pointers.access(op)
    row = ctx.plan.pointers.row_access(op)
    if acc is not None:
        _block_access(ctx, op, acc)
    elif row is not None:
        _row_gather(ctx, op, row)
    else:
        _gather_scatter(ctx, op)
