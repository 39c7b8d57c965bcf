"""Casts between element types: LLVM conversions for core scalars, SIMD_CAST for tensors and for
scalars still in the local store; same-size bitcasts are free views."""

from __future__ import annotations

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.arith import deferred_op, fold_splats
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import CastMode, DType, Flags, Op


# -- casts ---------------------------------------------------------------------------------------
def _scalar_cast(ctx: KernelLowering, op: Operation, x: ir.Value) -> ir.Value:
    b = ctx.b
    res = op.results[0]
    ty = dt.core_type(res.type)
    name = op.name
    if x.type == ty and name not in ("arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"):
        return x
    if name in ("arith.extsi", "arith.index_cast", "arith.index_castui"):
        if ty.width > x.type.width:
            return b.zext(x, ty) if name == "arith.index_castui" else b.sext(x, ty)
        return b.trunc(x, ty) if ty.width < x.type.width else x
    if name == "arith.extui":
        return b.zext(x, ty)
    if name == "arith.trunci":
        return b.trunc(x, ty)
    if name == "arith.sitofp":
        return b.sitofp(x, ty)
    if name == "arith.uitofp":
        return b.uitofp(x, ty)
    if name == "arith.fptosi":
        return b.fptosi(x, ty)
    if name == "arith.fptoui":
        return b.fptoui(x, ty)
    if name in ("arith.extf", "arith.truncf", "tt.fp_to_fp"):
        if isinstance(ty, ir.DoubleType):
            return b.fpext(x, ty)
        return b.fptrunc(x, ty)
    if name in ("tt.int_to_ptr", "tt.ptr_to_int"):
        return (
            b.zext(x, ty) if ty.width > x.type.width else (b.trunc(x, ty) if ty.width < x.type.width else x)
        )
    if name in ("arith.bitcast", "tt.bitcast"):
        if isinstance(x.type, ir.FloatType) and res.type.element_type.bitwidth != 32:
            raise UnsupportedError("bitcast of a 16-bit float scalar on the core")
        return b.bitcast(x, ty)
    raise UnsupportedError(f"scalar cast {name}")


_DEFERRABLE_CASTS = frozenset(
    {
        "arith.extsi",
        "arith.extui",
        "arith.trunci",
        "arith.sitofp",
        "arith.uitofp",
        "arith.fptosi",
        "arith.fptoui",
        "arith.extf",
        "arith.truncf",
    }
)


@rule(
    "arith.extsi",
    "arith.extui",
    "arith.trunci",
    "arith.sitofp",
    "arith.uitofp",
    "arith.fptosi",
    "arith.fptoui",
    "arith.extf",
    "arith.truncf",
    "tt.fp_to_fp",
    "arith.index_cast",
    "arith.index_castui",
    "arith.bitcast",
    "tt.bitcast",
    "tt.int_to_ptr",
    "tt.ptr_to_int",
)
def _cast(ctx: KernelLowering, op: Operation) -> None:
    if id(op) in ctx.fused_casts:
        return  # its operand's SIMD command wrote the narrow type (arith.fused_cast)
    a = op.operands[0]
    res = op.results[0]
    if not res.type.is_tensor:
        d = ctx.deferred(a)
        if d is not None and op.name in _DEFERRABLE_CASTS:
            unsigned_src = op.name in ("arith.extui", "arith.uitofp", "arith.fptoui")
            deferred_op(
                ctx,
                op,
                Op.SIMD_CAST,
                CastMode.DEFAULT,
                Flags.UNSIGNED if unsigned_src else 0,
                [d.buf],
                dt.to_dtype(a.type),
                dt.to_dtype(res.type),
            )
            return
        ctx.bind(res, _scalar_cast(ctx, op, ctx.scalar(a)))
        return
    unsigned = op.name in ("arith.extui", "arith.uitofp", "arith.fptoui", "arith.index_castui")
    in_dtype = dt.to_dtype(a.type)
    out_dtype = dt.to_dtype(res.type)
    ta = ctx.tensor(a)
    if isinstance(ta, Buf) and _widening_into_reduce(op, in_dtype, out_dtype):
        ctx.bind(res, ta)  # the reduction engine reads the narrow type and computes in fp32 itself
        return
    if isinstance(ta, Splat):
        if op.name in ("arith.bitcast", "tt.bitcast"):
            ta = ctx.materialize(ta)
        else:
            fold_splats(ctx, op, _scalar_cast(ctx, op, ta.scalar))
            return
    if op.name in ("arith.bitcast", "tt.bitcast", "tt.int_to_ptr", "tt.ptr_to_int") or (
        in_dtype == out_dtype
    ):
        if isa_itemsize(in_dtype) == isa_itemsize(out_dtype):
            ctx.bind(res, ta.view(ta.shape, ta.strides, out_dtype))
            return
    mode = CastMode.DEFAULT
    if op.name == "tt.fp_to_fp" and str(op.attr("rounding", "rtne")) == "rtz":
        mode = CastMode.RTZ
    dst = ctx.result_buf(op, res, out_dtype, reuse=[a])
    ctx.command(
        Op.SIMD_CAST,
        shape=tuple(res.shape),
        dst=dst,
        srcs=(ta,),
        dtypes=(out_dtype, in_dtype),
        subop=mode,
        flags=Flags.UNSIGNED if unsigned else 0,
    )
    ctx.bind(res, dst)


def _widening_into_reduce(op: Operation, in_dtype: DType, out_dtype: DType) -> bool:
    """An fp16/bf16 -> fp32 widening read only by one-operand reductions of it: the RED command can
    read the narrow tile (it computes in fp32 and stores the reduction's fp32 type)."""
    if op.name != "arith.extf" or in_dtype not in (DType.F16, DType.BF16) or out_dtype != DType.F32:
        return False
    users = op.results[0].users
    return bool(users) and all(
        u.name == "tt.reduce" and list(u.operands) == [op.results[0]] and u.parent is op.parent for u in users
    )


def isa_itemsize(d: DType) -> int:
    from mtia_sim.isa import ITEMSIZE

    return ITEMSIZE[d]
