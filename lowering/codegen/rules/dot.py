"""tt.dot -> DPE_MATMUL (accumulating into the accumulator's buffer when it dies here)."""

from __future__ import annotations

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import f64_bits
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation, Value
from mtia_sim.isa import ITEMSIZE, DType, Flags, Op, SimdOp


def _is_zero(ctx: KernelLowering, s: Splat) -> bool:
    c = getattr(s.scalar, "constant", None)
    return c is not None and not isinstance(c, str) and float(c) == 0.0


@rule("tt.dot")
def _dot(ctx: KernelLowering, op: Operation) -> None:
    a_v, b_v, c_v = op.operands[:3]
    res = op.results[0]
    rank = len(res.shape)
    if rank not in (2, 3):
        raise UnsupportedError(f"tt.dot of rank {rank}")
    out_dtype = dt.to_dtype(res.type)
    a, b = ctx.buf(a_v), ctx.buf(b_v)
    c = ctx.tensor(c_v)
    flags = 0
    if isinstance(c, Splat):
        dst = ctx.new_buf(res, tuple(res.shape), out_dtype)
        if not _is_zero(ctx, c):
            ctx.fill(dst, c.scalar, out_dtype)
            flags = Flags.ACCUMULATE
    else:
        dst = ctx.result_buf(op, res, out_dtype, reuse=[c_v])
        if dst.buffer is not c.buffer or dst.strides != c.strides:
            ctx.copy(dst, c)
        flags = Flags.ACCUMULATE
    batches = res.shape[0] if rank == 3 else 1
    for i in range(batches):
        if rank == 3:
            av = a.view(a.shape[1:], a.strides[1:], byte_offset=i * a.strides[0] * ITEMSIZE[a.dtype])
            bv = b.view(b.shape[1:], b.strides[1:], byte_offset=i * b.strides[0] * ITEMSIZE[b.dtype])
            dv = dst.view(
                dst.shape[1:], dst.strides[1:], byte_offset=i * dst.strides[0] * ITEMSIZE[dst.dtype]
            )
        else:
            av, bv, dv = a, b, dst
        _matmul(ctx, av, bv, dv, flags)
    ctx.bind(res, dst)


def _matmul(ctx: KernelLowering, a: Buf, b: Buf, d: Buf, flags: int) -> None:
    m, k = a.shape
    n = b.shape[1]
    ctx.note_write(d, Op.DPE_MATMUL)
    ctx.command(
        Op.DPE_MATMUL,
        shape=(m, n, k, 1),
        raw_dims=True,
        dst=(ctx.local_addr(d), [d.strides[0], d.strides[1], 0, 0]),
        srcs=(
            (ctx.local_addr(a), [a.strides[0], 0, a.strides[1], 0]),
            (ctx.local_addr(b), [0, b.strides[1], b.strides[0], 0]),
        ),
        dtypes=(d.dtype, a.dtype, b.dtype),
        flags=flags,
    )


_SCALED_FORMATS = {"e4m3": DType.F8E4M3, "e5m2": DType.F8E5M2, "bf16": DType.BF16, "fp16": DType.F16}


def _upcast_scaled(ctx: KernelLowering, x: Buf, scale: Buf | None, k_axis: int) -> Buf:
    """x (fp8/16) -> F32 times 2**(scale - 127), one e8m0 scale per 32 elements along K."""
    f = ctx.new_buf(None, x.shape, DType.F32)
    ctx.command(Op.SIMD_CAST, shape=x.shape, dst=f, srcs=(x,), dtypes=(DType.F32, x.dtype))
    if scale is None:
        return f
    s = ctx.new_buf(None, scale.shape, DType.F32)
    ctx.command(
        Op.SIMD_CAST,
        shape=scale.shape,
        dst=s,
        srcs=(scale,),
        dtypes=(DType.F32, DType.U8),
        flags=Flags.UNSIGNED,
    )
    ctx.command(
        Op.SIMD_BINARY,
        shape=s.shape,
        dst=s,
        srcs=(s,),
        dtypes=(DType.F32,) * 3,
        subop=SimdOp.SUB,
        flags=Flags.SRC1_IMM,
        imm1=f64_bits(127.0),
    )
    ctx.command(
        Op.SIMD_UNARY, shape=s.shape, dst=s, srcs=(s,), dtypes=(DType.F32, DType.F32), subop=SimdOp.EXP2
    )
    rows, cols = x.shape
    if k_axis == 1:  # x [M, K], scale [M, K/32]
        shape3 = (rows, cols // 32, 32)
        fv = f.view(shape3, (cols, 32, 1))
        sv = s.view(shape3, (s.strides[0], s.strides[1], 0))
    else:  # x [K, N], scale [N, K/32]
        shape3 = (rows // 32, 32, cols)
        fv = f.view(shape3, (32 * cols, cols, 1))
        sv = s.view(shape3, (s.strides[1], 0, s.strides[0]))
    ctx.command(
        Op.SIMD_BINARY, shape=shape3, dst=fv, srcs=(fv, sv), dtypes=(DType.F32,) * 3, subop=SimdOp.MUL
    )
    return f


@rule("tt.dot_scaled")
def _dot_scaled(ctx: KernelLowering, op: Operation) -> None:
    """Microscaled dot (mxfp8): upcast both operands with their block scales on the SIMD engine,
    then one fp32 DPE_MATMUL."""
    from lowering.ir.registry import named_operands

    ops = named_operands(op)
    fmts = (str(op.attr("a_elem_type", "")), str(op.attr("b_elem_type", "")))
    if any(f not in _SCALED_FORMATS for f in fmts):
        raise UnsupportedError(
            f"tl.dot_scaled with formats {fmts}", hint="use e4m3, e5m2, bf16 or fp16 operands"
        )
    res = op.results[0]
    if len(res.shape) != 2:
        raise UnsupportedError("batched tl.dot_scaled")
    a_v, b_v, c_v = ops["a"], ops["b"], ops["c"]
    assert isinstance(a_v, Value) and isinstance(b_v, Value) and isinstance(c_v, Value)
    if a_v.shape[1] % 32:
        raise UnsupportedError("tl.dot_scaled needs K to be a multiple of 32 (one scale per 32 elements)")
    scales = [ops.get("a_scale"), ops.get("b_scale")]
    a = _upcast_scaled(ctx, ctx.buf(a_v), ctx.buf(scales[0]) if isinstance(scales[0], Value) else None, 1)
    b = _upcast_scaled(ctx, ctx.buf(b_v), ctx.buf(scales[1]) if isinstance(scales[1], Value) else None, 0)
    out_dtype = dt.to_dtype(res.type)
    c = ctx.tensor(c_v)
    flags: int = Flags.ACCUMULATE
    if isinstance(c, Splat):
        dst = ctx.new_buf(res, tuple(res.shape), out_dtype)
        if _is_zero(ctx, c):
            flags = 0
        else:
            ctx.fill(dst, c.scalar, out_dtype)
    else:
        dst = ctx.result_buf(op, res, out_dtype, reuse=[c_v])
        if dst.buffer is not c.buffer or dst.strides != c.strides:
            ctx.copy(dst, c)
    _matmul(ctx, a, b, dst, flags)
    ctx.bind(res, dst)
