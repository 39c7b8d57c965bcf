"""Rules of `tt.mulhiui` and `tt.extern_elementwise` (kegen's libdevice: `__mtia_*` symbols become SIMD
engine ops, `lowering.codegen.extern_symbols`)."""

from __future__ import annotations

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I64
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.arith import simd_binary, unit_scalar
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import DType, Flags, Op, SimdOp


@rule("tt.mulhiui")
def _mulhiui(ctx: KernelLowering, op: Operation) -> None:
    """High half of the unsigned product: widen to 64 bits, multiply, shift, narrow."""
    a, b_v = op.operands
    res = op.results[0]
    width = res.type.element_type.bitwidth
    if not res.type.is_tensor:
        b = ctx.b
        wide = ir.IntType(2 * width)
        prod = b.mul(b.zext(ctx.scalar(a), wide), b.zext(ctx.scalar(b_v), wide))
        ctx.bind(res, b.trunc(b.lshr(prod, wide(width)), ir.IntType(width)))
        return
    if width != 32:
        raise UnsupportedError(f"tl.umulhi on {width}-bit integers", hint="use 32-bit operands")
    shape = tuple(res.shape)
    wide_bufs = []
    for v in (a, b_v):
        w = ctx.new_buf(None, shape, DType.U64)
        x = ctx.tensor(v)
        if isinstance(x, Splat):
            ctx.command(
                Op.SIMD_FILL,
                shape=shape,
                dst=w,
                dtypes=(DType.U64,),
                imm0=ctx.b.zext(x.scalar, I64),
                flags=Flags.IMM_IS_INT,
            )
        else:
            ctx.command(
                Op.SIMD_CAST,
                shape=shape,
                dst=w,
                srcs=(x,),
                dtypes=(DType.U64, DType.U32),
                flags=Flags.UNSIGNED,
            )
        wide_bufs.append(w)
    p, q = wide_bufs
    u64 = (DType.U64, DType.U64, DType.U64)
    ctx.command(
        Op.SIMD_BINARY, shape=shape, dst=p, srcs=(p, q), dtypes=u64, subop=SimdOp.MUL, flags=Flags.UNSIGNED
    )
    ctx.command(
        Op.SIMD_BINARY,
        shape=shape,
        dst=p,
        srcs=(p,),
        dtypes=u64,
        subop=SimdOp.SHR,
        flags=Flags.UNSIGNED | Flags.SRC1_IMM | Flags.IMM_IS_INT,
        imm1=32,
    )
    dst = ctx.new_buf(res, shape, DType.I32)
    ctx.command(
        Op.SIMD_CAST, shape=shape, dst=dst, srcs=(p,), dtypes=(DType.U32, DType.U64), flags=Flags.UNSIGNED
    )
    ctx.bind(res, dst.view(dst.shape, dst.strides, DType.I32))


@rule("tt.extern_elementwise")
def _extern(ctx: KernelLowering, op: Operation) -> None:
    """libdevice calls (`lowering.backend.libdevice`): `__mtia_NAME` symbols name a SIMD op."""
    from lowering.codegen.extern_symbols import SYMBOLS

    symbol = str(op.attr("symbol", ""))
    if symbol not in SYMBOLS:
        raise UnsupportedError(
            f"extern function {symbol!r} has no MTIA implementation",
            hint="use triton.language.extra.libdevice functions or tl.math",
        )
    simd_name, nargs = SYMBOLS[symbol]
    subop = SimdOp[simd_name]
    res = op.results[0]
    in_dtype = dt.to_dtype(op.operands[0].type)
    out_dtype = dt.to_dtype(res.type)
    command = Op.SIMD_UNARY if nargs == 1 else Op.SIMD_BINARY
    if not res.type.is_tensor:
        xs = [ctx.scalar(v) for v in op.operands]
        ctx.bind(res, unit_scalar(ctx, command, subop, 0, xs, in_dtype, out_dtype, dt.core_type(res.type)))
        return
    if nargs == 2:
        ctx.bind(
            res,
            simd_binary(
                ctx, op, ctx.tensor(op.operands[0]), ctx.tensor(op.operands[1]), subop, 0, in_dtype, out_dtype
            ),
        )
        return
    src = ctx.buf(op.operands[0])
    dst = ctx.result_buf(op, res, out_dtype, reuse=[op.operands[0]])
    ctx.command(
        Op.SIMD_UNARY, shape=tuple(res.shape), dst=dst, srcs=(src,), dtypes=(out_dtype, in_dtype), subop=subop
    )
    ctx.bind(res, dst)
