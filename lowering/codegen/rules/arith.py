"""Elementwise arithmetic, comparisons, selects, casts, math and constants.

Scalars become LLVM instructions on the core; tensors become SIMD engine commands, with a splat
operand passed as an immediate. Float math without a core instruction (exp, log, ...) on a scalar
runs on the SIMD engine over one element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.lower import KernelLowering
from lowering.codegen.rules.table import rule
from lowering.codegen.values import Buf, DeferredScalar, Splat
from lowering.errors import UnsupportedError
from lowering.ir.core import Operation
from mtia_sim.isa import CmpOp, DType, Flags, Op, SimdOp

B: Any = ir.IRBuilder
ScalarFn = Callable[[Any, ir.Value, ir.Value], ir.Value]


def _smax(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _umax(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_unsigned(">", x, y), x, y)


def _umin(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_unsigned("<", x, y), x, y)


def _fmax(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.fcmp_ordered(">", x, y), x, y)


def _fmin(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.fcmp_ordered("<", x, y), x, y)


def _sdiv_adjusted(b: Any, x: ir.Value, y: ir.Value, sign_cmp: str) -> tuple[ir.Value, ir.Value]:
    """Signed quotient and a zero-extended 0/1 adjustment: remainder is nonzero and
    the signs of remainder and divisor compare `sign_cmp` ("!=" floor, "==" ceil)."""
    q = b.sdiv(x, y)
    r = b.srem(x, y)
    adjust = b.and_(
        b.icmp_signed("!=", r, r.type(0)),
        b.icmp_signed(sign_cmp, b.icmp_signed("<", r, r.type(0)), b.icmp_signed("<", y, y.type(0))),
    )
    return q, b.zext(adjust, q.type)


def _floordiv(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    q, adjust = _sdiv_adjusted(b, x, y, "!=")
    return b.sub(q, adjust)


def _ceildiv(b: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    q, adjust = _sdiv_adjusted(b, x, y, "==")
    return b.add(q, adjust)


# op name -> (SIMD op, flags, scalar builder or None: the scalar runs on the SIMD engine too)
BINARY: dict[str, tuple[SimdOp, int, ScalarFn | None]] = {
    "arith.addi": (SimdOp.ADD, 0, B.add),
    "arith.subi": (SimdOp.SUB, 0, B.sub),
    "arith.muli": (SimdOp.MUL, 0, B.mul),
    "arith.divsi": (SimdOp.DIV, 0, B.sdiv),
    "arith.divui": (SimdOp.DIV, Flags.UNSIGNED, B.udiv),
    "arith.remsi": (SimdOp.REM, 0, B.srem),
    "arith.remui": (SimdOp.REM, Flags.UNSIGNED, B.urem),
    "arith.andi": (SimdOp.AND, 0, B.and_),
    "arith.ori": (SimdOp.OR, 0, B.or_),
    "arith.xori": (SimdOp.XOR, 0, B.xor),
    "arith.shli": (SimdOp.SHL, 0, B.shl),
    "arith.shrsi": (SimdOp.SHR, 0, B.ashr),
    "arith.shrui": (SimdOp.SHR, Flags.UNSIGNED, B.lshr),
    "arith.maxsi": (SimdOp.MAX, 0, _smax),
    "arith.minsi": (SimdOp.MIN, 0, _smin),
    "arith.maxui": (SimdOp.MAX, Flags.UNSIGNED, _umax),
    "arith.minui": (SimdOp.MIN, Flags.UNSIGNED, _umin),
    "arith.floordivsi": (SimdOp.DIV_FLOOR, 0, _floordiv),
    "arith.addf": (SimdOp.ADD, 0, B.fadd),
    "arith.subf": (SimdOp.SUB, 0, B.fsub),
    "arith.mulf": (SimdOp.MUL, 0, B.fmul),
    "arith.divf": (SimdOp.DIV, 0, B.fdiv),
    "tt.precise_divf": (SimdOp.DIV, 0, B.fdiv),
    "arith.remf": (SimdOp.REM, 0, None),
    "arith.maximumf": (SimdOp.MAX, Flags.PROPAGATE_NAN, None),
    "arith.minimumf": (SimdOp.MIN, Flags.PROPAGATE_NAN, None),
    "arith.maxnumf": (SimdOp.MAX, 0, _fmax),
    "arith.minnumf": (SimdOp.MIN, 0, _fmin),
    "math.powf": (SimdOp.POW, 0, None),
    "math.atan2": (SimdOp.ATAN2, 0, None),
    "math.copysign": (SimdOp.MUL, 0, None),
}

UNARY: dict[str, SimdOp] = {
    "math.exp": SimdOp.EXP,
    "math.exp2": SimdOp.EXP2,
    "math.log": SimdOp.LOG,
    "math.log2": SimdOp.LOG2,
    "math.sqrt": SimdOp.SQRT,
    "tt.precise_sqrt": SimdOp.SQRT,
    "math.rsqrt": SimdOp.RSQRT,
    "math.tanh": SimdOp.TANH,
    "math.erf": SimdOp.ERF,
    "math.sin": SimdOp.SIN,
    "math.cos": SimdOp.COS,
    "math.floor": SimdOp.FLOOR,
    "math.ceil": SimdOp.CEIL,
    "math.absf": SimdOp.ABS,
    "math.absi": SimdOp.ABS,
    "math.log1p": SimdOp.LOG1P,
    "math.expm1": SimdOp.EXPM1,
    "math.trunc": SimdOp.TRUNC,
    "math.roundeven": SimdOp.ROUND,
    "math.tan": SimdOp.TAN,
    "math.asin": SimdOp.ASIN,
    "math.acos": SimdOp.ACOS,
    "math.atan": SimdOp.ATAN,
    "math.sinh": SimdOp.SINH,
    "math.cosh": SimdOp.COSH,
    "arith.negf": SimdOp.NEG,
}

CMP: dict[str, tuple[CmpOp, int]] = {
    "eq": (CmpOp.EQ, 0),
    "ne": (CmpOp.NE, 0),
    "slt": (CmpOp.LT, 0),
    "sle": (CmpOp.LE, 0),
    "sgt": (CmpOp.GT, 0),
    "sge": (CmpOp.GE, 0),
    "ult": (CmpOp.LT, Flags.UNSIGNED),
    "ule": (CmpOp.LE, Flags.UNSIGNED),
    "ugt": (CmpOp.GT, Flags.UNSIGNED),
    "uge": (CmpOp.GE, Flags.UNSIGNED),
    "oeq": (CmpOp.EQ, 0),
    "one": (CmpOp.NE, 0),
    "olt": (CmpOp.LT, 0),
    "ole": (CmpOp.LE, 0),
    "ogt": (CmpOp.GT, 0),
    "oge": (CmpOp.GE, 0),
    "ueq": (CmpOp.EQ, 0),
    "une": (CmpOp.NE, 0),
    "ult_f": (CmpOp.LT, 0),
}
_LLVM_CMP = {CmpOp.EQ: "==", CmpOp.NE: "!=", CmpOp.LT: "<", CmpOp.LE: "<=", CmpOp.GT: ">", CmpOp.GE: ">="}


# -- generic tensor helpers ---------------------------------------------------------------------
_NARROW_FLOATS = (DType.F16, DType.BF16)


def fused_cast(ctx: KernelLowering, op: Operation, out_dtype: DType) -> Operation | None:
    """The float-narrowing cast that is the only user of `op`'s fp32 tensor result, if any: `op`'s
    SIMD command can write the narrow type itself (the SIMD computes in fp32 and rounds to nearest
    even on the store, as the cast would), saving a SIMD pass and the fp32 tile."""
    res = op.results[0]
    users = res.users
    if out_dtype != DType.F32 or len(users) != 1 or id(res) in ctx.dest_hints:
        return None
    cast = users[0]
    if cast.name not in ("arith.truncf", "tt.fp_to_fp") or cast.operands[0] is not res:
        return None
    if cast.parent is None or cast.parent is not op.parent:
        return None  # a cast in a loop or branch body: its value's lifetime is planned there
    if cast.name == "tt.fp_to_fp" and str(cast.attr("rounding", "rtne")) == "rtz":
        return None
    narrow = cast.results[0]
    if not narrow.type.is_tensor or tuple(narrow.shape) != tuple(res.shape):
        return None
    return cast if dt.to_dtype(narrow.type) in _NARROW_FLOATS else None


def simd_result(
    ctx: KernelLowering, op: Operation, out_dtype: DType, reuse: list[Any]
) -> tuple[Buf, DType, Any]:
    """(destination, its dtype, the value it computes) of `op`'s SIMD command: the narrowing cast's
    result where `fused_cast` applies (the cast is then marked done), else `op`'s own."""
    cast = fused_cast(ctx, op, out_dtype)
    if cast is None:
        res = op.results[0]
        return ctx.result_buf(op, res, out_dtype, reuse=reuse), out_dtype, res
    narrow = cast.results[0]
    narrow_dtype = dt.to_dtype(narrow.type)
    ctx.fused_casts.add(id(cast))
    return ctx.result_buf(op, narrow, narrow_dtype, reuse=reuse), narrow_dtype, narrow


def simd_binary(
    ctx: KernelLowering,
    op: Operation,
    a: Buf | Splat,
    b: Buf | Splat,
    subop: int,
    flags: int,
    in_dtype: DType,
    out_dtype: DType,
    command: Op = Op.SIMD_BINARY,
    dst: Buf | None = None,
) -> Buf:
    res = op.results[0]
    if dst is None:
        reuse = [v for v, x in zip(op.operands[:2], (a, b), strict=False) if isinstance(x, Buf)]
        dst = ctx.result_buf(op, res, out_dtype, reuse=reuse)
    shape = tuple(res.shape)
    dts = (out_dtype, in_dtype, in_dtype)
    if isinstance(b, Splat) and isinstance(a, Buf):
        ctx.command(
            command,
            shape=shape,
            dst=dst,
            srcs=(a,),
            dtypes=dts,
            subop=subop,
            flags=flags | Flags.SRC1_IMM | ctx.imm_flags(in_dtype),
            imm1=ctx.imm(b.scalar, in_dtype),
        )
    elif isinstance(a, Splat) and isinstance(b, Buf):
        ctx.command(
            command,
            shape=shape,
            dst=dst,
            srcs=(None, b),
            dtypes=dts,
            subop=subop,
            flags=flags | Flags.SRC0_IMM | ctx.imm_flags(in_dtype),
            imm0=ctx.imm(a.scalar, in_dtype),
        )
    else:
        ab = a if isinstance(a, Buf) else ctx.materialize(a)
        bb = b if isinstance(b, Buf) else ctx.materialize(b)
        ctx.command(command, shape=shape, dst=dst, srcs=(ab, bb), dtypes=dts, subop=subop, flags=flags)
    return dst


def unit_scalar(
    ctx: KernelLowering,
    command: Op,
    subop: int,
    flags: int,
    inputs: list[ir.Value],
    in_dtype: DType,
    out_dtype: DType,
    out_ty: ir.Type,
) -> ir.Value:
    """Evaluate a scalar op on the SIMD engine over one element and read it back."""
    bufs = []
    for x in inputs:
        one = ctx.new_buf(None, (1,), in_dtype)
        ctx.fill(one, x, in_dtype)
        bufs.append(one)
    dst = ctx.new_buf(None, (1,), out_dtype)
    ctx.command(
        command,
        shape=(1,),
        dst=dst,
        srcs=bufs,
        dtypes=(out_dtype, in_dtype, in_dtype, in_dtype),
        subop=subop,
        flags=flags,
    )
    return ctx.read_scalar(dst, out_ty)


def fold_splats(ctx: KernelLowering, op: Operation, scalar: ir.Value) -> None:
    res = op.results[0]
    ctx.bind(res, Splat(scalar, tuple(res.shape), dt.to_dtype(res.type)))


# -- rules ----------------------------------------------------------------------------------------
def _binary(ctx: KernelLowering, op: Operation) -> None:
    subop, flags, scalar_fn = BINARY[op.name]
    a, b = op.operands[0], op.operands[1]
    res = op.results[0]
    in_dtype = dt.to_dtype(a.type)
    out_dtype = dt.to_dtype(res.type)
    if op.name == "math.copysign":
        raise UnsupportedError("copysign has no SIMD op", hint="use tl.where(y < 0, -tl.abs(x), tl.abs(x))")

    def on_core(x: ir.Value, y: ir.Value) -> ir.Value:
        if scalar_fn is not None:
            return scalar_fn(ctx.b, x, y)
        return unit_scalar(ctx, Op.SIMD_BINARY, subop, flags, [x, y], in_dtype, out_dtype, x.type)

    if not res.type.is_tensor:
        if ctx.deferred(a) is not None or ctx.deferred(b) is not None:
            srcs = [ctx.scalar_operand(v, (1,), in_dtype) for v in (a, b)]
            deferred_op(ctx, op, Op.SIMD_BINARY, subop, flags, srcs, in_dtype, out_dtype)
            return
        ctx.bind(res, on_core(ctx.scalar(a), ctx.scalar(b)))
        return
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if isinstance(ta, Splat) and isinstance(tb, Splat):
        fold_splats(ctx, op, on_core(ta.scalar, tb.scalar))
        return
    reuse = [v for v, x in zip(op.operands[:2], (ta, tb), strict=False) if isinstance(x, Buf)]
    dst, dst_dtype, value = simd_result(ctx, op, out_dtype, reuse)
    ctx.bind(value, simd_binary(ctx, op, ta, tb, subop, flags, in_dtype, dst_dtype, dst=dst))


def deferred_op(
    ctx: KernelLowering,
    op: Operation,
    command: Op,
    subop: int,
    flags: int,
    srcs: list[Buf | Splat],
    in_dtype: DType,
    out_dtype: DType,
) -> None:
    """A scalar op on a unit-produced scalar: one 1-element SIMD command, the result stays deferred."""
    res = op.results[0]
    dst = ctx.new_buf(res, (1,), out_dtype)
    dts = (out_dtype, in_dtype, in_dtype)
    a = srcs[0]
    b = srcs[1] if len(srcs) > 1 else None
    if isinstance(a, Splat) and b is not None and isinstance(b, Buf):
        ctx.command(
            command,
            shape=(1,),
            dst=dst,
            srcs=(None, b),
            dtypes=dts,
            subop=subop,
            flags=flags | Flags.SRC0_IMM | ctx.imm_flags(in_dtype),
            imm0=ctx.imm(a.scalar, in_dtype),
        )
    elif isinstance(b, Splat) and isinstance(a, Buf):
        ctx.command(
            command,
            shape=(1,),
            dst=dst,
            srcs=(a,),
            dtypes=dts,
            subop=subop,
            flags=flags | Flags.SRC1_IMM | ctx.imm_flags(in_dtype),
            imm1=ctx.imm(b.scalar, in_dtype),
        )
    else:
        bufs = [x if isinstance(x, Buf) else ctx.materialize(x) for x in srcs]
        ctx.command(command, shape=(1,), dst=dst, srcs=bufs, dtypes=dts, subop=subop, flags=flags)
    ctx.bind(res, DeferredScalar(dst, dt.core_type(res.type)))


for _name in BINARY:
    rule(_name)(_binary)


def _unary(ctx: KernelLowering, op: Operation) -> None:
    subop = UNARY[op.name]
    a = op.operands[0]
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    if not res.type.is_tensor:
        if ctx.deferred(a) is not None:
            deferred_op(ctx, op, Op.SIMD_UNARY, subop, 0, [ctx.scalar_operand(a, (1,), dtype)], dtype, dtype)
            return
        x = ctx.scalar(a)
        if subop == SimdOp.NEG:
            ctx.bind(res, ctx.b.fneg(x))
        else:
            ctx.bind(res, unit_scalar(ctx, Op.SIMD_UNARY, subop, 0, [x], dtype, dtype, x.type))
        return
    ta = ctx.tensor(a)
    if isinstance(ta, Splat) and subop == SimdOp.NEG:
        fold_splats(ctx, op, ctx.b.fneg(ta.scalar))
        return
    src = ctx.buf(a)
    dst, dst_dtype, value = simd_result(ctx, op, dtype, [a])
    ctx.command(
        Op.SIMD_UNARY, shape=tuple(res.shape), dst=dst, srcs=(src,), dtypes=(dst_dtype, dtype), subop=subop
    )
    ctx.bind(value, dst)


for _name in UNARY:
    rule(_name)(_unary)


@rule("math.fma")
def _fma(ctx: KernelLowering, op: Operation) -> None:
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    if not res.type.is_tensor:
        a, b, c = (ctx.scalar(v) for v in op.operands)
        ctx.bind(res, ctx.b.fadd(ctx.b.fmul(a, b), c))
        return
    srcs = [ctx.buf(v) for v in op.operands]
    dst = ctx.result_buf(op, res, dtype, reuse=list(op.operands))
    ctx.command(Op.SIMD_FMA, shape=tuple(res.shape), dst=dst, srcs=srcs, dtypes=(dtype, dtype, dtype, dtype))
    ctx.bind(res, dst)


@rule("tt.clampf")
def _clampf(ctx: KernelLowering, op: Operation) -> None:
    x, lo, hi = op.operands
    res = op.results[0]
    dtype = dt.to_dtype(res.type)
    if not res.type.is_tensor:
        b = ctx.b
        ctx.bind(res, _fmin(b, _fmax(b, ctx.scalar(x), ctx.scalar(lo)), ctx.scalar(hi)))
        return
    tmp = simd_binary(ctx, op, ctx.tensor(x), ctx.tensor(lo), SimdOp.MAX, 0, dtype, dtype)
    dst = ctx.result_buf(op, res, dtype)
    th = ctx.tensor(hi)
    if isinstance(th, Splat):
        ctx.command(
            Op.SIMD_BINARY,
            shape=tuple(res.shape),
            dst=dst,
            srcs=(tmp,),
            dtypes=(dtype, dtype, dtype),
            subop=SimdOp.MIN,
            flags=Flags.SRC1_IMM,
            imm1=ctx.imm(th.scalar, dtype),
        )
    else:
        ctx.command(
            Op.SIMD_BINARY,
            shape=tuple(res.shape),
            dst=dst,
            srcs=(tmp, th),
            dtypes=(dtype, dtype, dtype),
            subop=SimdOp.MIN,
        )
    ctx.bind(res, dst)


@rule("arith.cmpi", "arith.cmpf")
def _cmp(ctx: KernelLowering, op: Operation) -> None:
    pred = str(op.attr("predicate"))
    if op.name == "arith.cmpf" and pred in ("ult", "ule", "ugt", "uge"):
        cmp, flags = {"ult": CmpOp.LT, "ule": CmpOp.LE, "ugt": CmpOp.GT, "uge": CmpOp.GE}[pred], 0
    elif pred in CMP:
        cmp, flags = CMP[pred]
    else:
        raise UnsupportedError(f"comparison predicate {pred!r} has no SIMD lowering")
    a, b = op.operands
    res = op.results[0]
    in_dtype = dt.to_dtype(a.type)
    is_f = op.name == "arith.cmpf"

    def on_core(x: ir.Value, y: ir.Value) -> ir.Value:
        bld = ctx.b
        if is_f:
            if pred.startswith("u"):
                return bld.fcmp_unordered(_LLVM_CMP[cmp], x, y)
            return bld.fcmp_ordered(_LLVM_CMP[cmp], x, y)
        if flags & Flags.UNSIGNED:
            return bld.icmp_unsigned(_LLVM_CMP[cmp], x, y)
        return bld.icmp_signed(_LLVM_CMP[cmp], x, y)

    if not res.type.is_tensor:
        ctx.bind(res, on_core(ctx.scalar(a), ctx.scalar(b)))
        return
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if isinstance(ta, Splat) and isinstance(tb, Splat):
        fold_splats(ctx, op, on_core(ta.scalar, tb.scalar))
        return
    ctx.bind(res, simd_binary(ctx, op, ta, tb, cmp, flags, in_dtype, DType.I1, command=Op.SIMD_CMP))


@rule("arith.select")
def _select(ctx: KernelLowering, op: Operation) -> None:
    c, a, b = op.operands
    res = op.results[0]
    if not res.type.is_tensor:
        ctx.bind(res, ctx.b.select(ctx.scalar(c), ctx.scalar(a), ctx.scalar(b)))
        return
    dtype = dt.to_dtype(res.type)
    shape = tuple(res.shape)
    cond = ctx.tensor(c) if c.type.is_tensor else Splat(ctx.scalar(c), shape, DType.I1)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    if isinstance(cond, Splat) and isinstance(ta, Splat) and isinstance(tb, Splat):
        fold_splats(ctx, op, ctx.b.select(cond.scalar, ta.scalar, tb.scalar))
        return
    cb = cond if isinstance(cond, Buf) else ctx.materialize(cond)
    ab = ta if isinstance(ta, Buf) else ctx.materialize(ta)
    bb = tb if isinstance(tb, Buf) else ctx.materialize(tb)
    dst = ctx.result_buf(op, res, dtype, reuse=[a, b])
    ctx.command(
        Op.SIMD_SELECT, shape=shape, dst=dst, srcs=(cb, ab, bb), dtypes=(dtype, DType.I1, dtype, dtype)
    )
    ctx.bind(res, dst)
