"""SIMD engine: elementwise unary/binary/select/fma/cast/fill/iota/compare over the 4-D index space.

Math is done the way Triton code would do it: floats up to 32 bits in fp32 (rounded once to the
output type), F64 in fp64, integers in their own width with wrap-around and C division semantics.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.events import CommandEvent
from mtia_sim.isa import TRANSCENDENTAL, CastMode, CmpOp, CommandDescriptor, DType, Flags, Op, SimdOp
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dtypes
from mtia_sim.units.dtypes import FLOATS, INTS, compute_dtype, convert, immediate
from mtia_sim.units.native import FillOp, UfuncOp, with_ops
from mtia_sim.units.operand import Tally, check_shape

Array = np.ndarray


# -- integer helpers (C semantics) ------------------------------------------------------------
def c_div(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return a / b
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    q = a // safe
    if a.dtype.kind == "i":
        fix = (a % safe != 0) & ((a < 0) != (safe < 0))
        q = q + fix.astype(a.dtype)
    return np.where(b == 0, np.zeros((), a.dtype), q).astype(a.dtype)


def c_rem(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    r = a - c_div(a, safe) * safe
    return np.where(b == 0, np.zeros((), a.dtype), r).astype(a.dtype)


def floor_div(a: Array, b: Array) -> Array:
    if a.dtype.kind == "f":
        return np.floor(a / b)
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, np.zeros((), a.dtype), a // safe).astype(a.dtype)


def _shift_amount(a: Array, b: Array) -> Array:
    return np.asarray(b).astype(a.dtype, casting="unsafe") & np.array(a.dtype.itemsize * 8 - 1, a.dtype)


def erf(x: Array) -> Array:
    """erf to ~1e-7 relative (Taylor series near 0, Numerical Recipes erfc elsewhere)."""
    x64 = np.asarray(x, dtype=np.float64)
    ax = np.abs(x64)
    t = 1.0 / (1.0 + 0.5 * ax)
    poly = -ax * ax - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    far = np.sign(x64) * (1.0 - t * np.exp(poly))
    x2 = x64 * x64
    near = x64 * (2.0 / np.sqrt(np.pi)) * (1 - x2 / 3 + x2 ** 2 / 10 - x2 ** 3 / 42 + x2 ** 4 / 216
                                           - x2 ** 5 / 1320 + x2 ** 6 / 9360)
    return np.where(ax < 0.5, near, far).astype(np.asarray(x).dtype)


def _gelu_tanh(x: Array) -> Array:
    c = np.asarray(np.sqrt(2.0 / np.pi), x.dtype)
    return (0.5 * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x * x * x)))).astype(x.dtype)


def _sigmoid(x: Array) -> Array:
    return (1 / (1 + np.exp(-x))).astype(x.dtype)


UNARY_FLOAT: dict[SimdOp, Callable[[Array], Array]] = {
    SimdOp.NEG: np.negative, SimdOp.ABS: np.abs, SimdOp.EXP: np.exp, SimdOp.EXP2: np.exp2,
    SimdOp.LOG: np.log, SimdOp.LOG2: np.log2, SimdOp.SQRT: np.sqrt,
    SimdOp.RSQRT: lambda x: (1 / np.sqrt(x)).astype(x.dtype), SimdOp.SIGMOID: _sigmoid,
    SimdOp.TANH: np.tanh, SimdOp.ERF: erf, SimdOp.SIN: np.sin, SimdOp.COS: np.cos,
    SimdOp.FLOOR: np.floor, SimdOp.CEIL: np.ceil, SimdOp.RECIP: lambda x: (1 / x).astype(x.dtype),
    SimdOp.ROUND: np.rint, SimdOp.TRUNC: np.trunc, SimdOp.LOG1P: np.log1p, SimdOp.EXPM1: np.expm1,
    SimdOp.TAN: np.tan, SimdOp.ASIN: np.arcsin, SimdOp.ACOS: np.arccos, SimdOp.ATAN: np.arctan,
    SimdOp.SINH: np.sinh, SimdOp.COSH: np.cosh, SimdOp.GELU_TANH: _gelu_tanh,
}
UNARY_INT: dict[SimdOp, Callable[[Array], Array]] = {
    SimdOp.NEG: np.negative, SimdOp.ABS: np.abs, SimdOp.NOT: np.invert,
}

BINARY_COMMON: dict[SimdOp, Callable[[Array, Array], Array]] = {
    SimdOp.ADD: np.add, SimdOp.SUB: np.subtract, SimdOp.MUL: np.multiply, SimdOp.DIV: c_div,
    SimdOp.REM: c_rem, SimdOp.DIV_FLOOR: floor_div, SimdOp.POW: np.power,
}
BINARY_FLOAT: dict[SimdOp, Callable[[Array, Array], Array]] = {
    SimdOp.ATAN2: np.arctan2, SimdOp.MIN: np.fmin, SimdOp.MAX: np.fmax,
}
BINARY_INT: dict[SimdOp, Callable[[Array, Array], Array]] = {
    SimdOp.MIN: np.minimum, SimdOp.MAX: np.maximum, SimdOp.AND: np.bitwise_and,
    SimdOp.OR: np.bitwise_or, SimdOp.XOR: np.bitwise_xor,
    SimdOp.SHL: lambda a, b: np.left_shift(a, _shift_amount(a, b)),
    SimdOp.SHR: lambda a, b: np.right_shift(a, _shift_amount(a, b)),
}

CMP: dict[CmpOp, Callable[[Array, Array], Array]] = {
    CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal, CmpOp.LT: np.less, CmpOp.LE: np.less_equal,
    CmpOp.GT: np.greater, CmpOp.GE: np.greater_equal,
}


_SRC0_IMM, _SRC1_IMM = int(Flags.SRC0_IMM), int(Flags.SRC1_IMM)


class SimdCommand:
    """One SIMD command being executed: operand access helpers around a Tally."""

    def __init__(self, desc: CommandDescriptor, mem: MemorySystem, pe: int) -> None:
        self.d = desc
        self.shape = check_shape(desc.shape)
        self.tally = Tally(mem, pe)
        self.flags = int(desc.flags)
        self.unsigned = bool(self.flags & Flags.UNSIGNED)
        if desc.dtype_out == DType.NONE:
            raise IllegalCommandError(f"{desc.op.name} needs dtype_out")

    def in_dtype(self, k: int) -> DType:
        dt = (self.d.dtype_in0, self.d.dtype_in1, self.d.dtype_in2)[k]
        return self.d.dtype_out if dt == DType.NONE else dt

    def src(self, k: int, dt: DType | None = None) -> Array:
        """Input k as values (I1 as bool), or its immediate with SRC0_IMM / SRC1_IMM."""
        d = self.d
        dt = dt or self.in_dtype(k)
        if k == 0 and self.flags & _SRC0_IMM:
            return self._imm(d.imm0, dt)
        if k == 1 and self.flags & _SRC1_IMM:
            return self._imm(d.imm1, dt)
        addr = (d.src0, d.src1, d.src2)[k]
        strides = (d.src0_stride, d.src1_stride, d.src2_stride)[k]
        v = self.tally.view(f"src{k}", addr, dt, self.shape, strides, write=False)
        return dtypes.load(v, dt, self.unsigned)

    def _imm(self, bits: int, dt: DType) -> Array:
        val = immediate(bits, self.d.flags)
        if dt == DType.I1:
            return np.asarray(val != 0)
        out = convert(np.asarray(val), dt)
        return dtypes.as_unsigned(out) if self.unsigned else out

    def store(self, values: Array, *, unsigned_src: bool = False) -> None:
        d = self.d
        dst = self.tally.view("dst", d.dst, d.dtype_out, self.shape, d.dst_stride, write=True)
        dst[...] = convert(values, d.dtype_out, unsigned_src=unsigned_src)

    def event(self, flops_per_element: int = 1, transcendental: bool = False) -> CommandEvent:
        n = math.prod(self.shape)
        return self.tally.event(self.d, n, flops=n * flops_per_element, transcendental=transcendental,
                                dtype_bytes=dtypes.np_dtype(self.d.dtype_out).itemsize)

    def compute(self, k: int) -> Array:
        """Input k converted to the output's compute type."""
        ct = compute_dtype(self.d.dtype_out, self.unsigned)
        return np.asarray(self.src(k)).astype(ct, copy=False)


def _subop(enum_cls, value: int, op: Op):  # type: ignore[no-untyped-def]
    try:
        return enum_cls(value)
    except ValueError:
        raise IllegalCommandError(f"{op.name}: unknown subop {value} for {enum_cls.__name__}") from None


def _unary_fn(c: SimdCommand, op: SimdOp, kind: str) -> Callable[[Array], Array]:
    table = UNARY_FLOAT if kind == "f" else UNARY_INT
    fn = table.get(op)
    if fn is None:
        raise IllegalCommandError(f"SIMD_UNARY: {op.name} is not a unary op for {c.d.dtype_out.name}")
    return fn


def _binary_fn(c: SimdCommand, op: SimdOp, kind: str) -> Callable[[Array, Array], Array]:
    if kind == "f":
        fn = BINARY_FLOAT.get(op) or BINARY_COMMON.get(op)
        if op in (SimdOp.MIN, SimdOp.MAX) and c.d.flags & Flags.PROPAGATE_NAN:
            fn = np.minimum if op == SimdOp.MIN else np.maximum
    else:
        fn = BINARY_INT.get(op) or BINARY_COMMON.get(op)
    if fn is None:
        raise IllegalCommandError(f"SIMD_BINARY: {op.name} is not a binary op for {c.d.dtype_out.name}")
    return fn


def simd_unary(c: SimdCommand) -> CommandEvent:
    op = _subop(SimdOp, c.d.subop, c.d.op)
    if op in (SimdOp.ISNAN, SimdOp.ISINF):
        x = np.asarray(c.src(0)).astype(np.float64)
        c.store(np.isnan(x) if op == SimdOp.ISNAN else np.isinf(x))
        return c.event()
    x = c.compute(0)
    c.store(_unary_fn(c, op, x.dtype.kind)(x))
    return c.event(transcendental=op in TRANSCENDENTAL)


def simd_binary(c: SimdCommand) -> CommandEvent:
    op = _subop(SimdOp, c.d.subop, c.d.op)
    a, b = c.compute(0), c.compute(1)
    c.store(_binary_fn(c, op, a.dtype.kind)(a, b))
    return c.event(transcendental=op in TRANSCENDENTAL)


def simd_select(c: SimdCommand) -> CommandEvent:
    cond = np.asarray(c.src(0, DType.I1 if c.d.dtype_in0 == DType.NONE else None)) != 0
    c.store(np.where(cond, c.compute(1), c.compute(2)))
    return c.event()


def simd_fma(c: SimdCommand) -> CommandEvent:
    ct = compute_dtype(c.d.dtype_out, c.unsigned)
    wide = np.float64 if ct.kind == "f" else ct
    a, b, s = (np.asarray(c.src(k)).astype(wide) for k in range(3))
    c.store((a * b + s).astype(ct))
    return c.event(flops_per_element=2)


def _round_toward_zero(x: Array, dt: DType) -> Array:
    out = dtypes.np_dtype(dt)
    y = x.astype(out)
    if dt == DType.BF16 and x.dtype == np.float32:
        return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(out)
    if dt in (DType.F16, DType.F32):
        yf = y.astype(np.float64)
        xf = x.astype(np.float64)
        over = np.isfinite(xf) & (np.abs(yf) > np.abs(xf))
        return np.where(over, np.nextafter(y, np.zeros((), out)), y)
    raise IllegalCommandError(f"SIMD_CAST: round-toward-zero to {dt.name} is not supported")


def simd_cast(c: SimdCommand) -> CommandEvent:
    mode = _subop(CastMode, c.d.subop, c.d.op)
    src_dt = c.in_dtype(0)
    out_dt = c.d.dtype_out
    if mode == CastMode.BITCAST:
        a, b = dtypes.np_dtype(src_dt), dtypes.np_dtype(out_dt)
        if a.itemsize != b.itemsize:
            raise IllegalCommandError(f"SIMD_CAST bitcast {src_dt.name} -> {out_dt.name}: sizes differ")
        raw = c.tally.view("src0", c.d.src0, src_dt, c.shape, c.d.src0_stride, write=False)
        dst = c.tally.view("dst", c.d.dst, out_dt, c.shape, c.d.dst_stride, write=True)
        dst.view(raw.dtype)[...] = raw
        return c.event()
    x = np.asarray(c.src(0))
    if mode == CastMode.RTZ and src_dt in FLOATS and out_dt in FLOATS:
        c.store(_round_toward_zero(x, out_dt))
    else:
        c.store(x, unsigned_src=c.unsigned and src_dt in INTS)
    return c.event()


def simd_fill(c: SimdCommand) -> CommandEvent:
    c.store(c._imm(c.d.imm0, c.d.dtype_out))
    return c.event()


def simd_iota(c: SimdCommand) -> CommandEvent:
    axis = c.d.subop
    if not 0 <= axis < 4:
        raise IllegalCommandError(f"SIMD_IOTA: axis (subop) must be 0..3, got {axis}")
    start = immediate(c.d.imm0, c.d.flags)
    idx_shape = [1, 1, 1, 1]
    idx_shape[axis] = c.shape[axis]
    ct = compute_dtype(c.d.dtype_out)
    idx = np.arange(c.shape[axis], dtype=np.int64).reshape(idx_shape)
    if ct.kind in "iu":
        vals = idx + convert(np.asarray(start), DType.I64)  # wraps like the hardware counter
    else:
        vals = idx.astype(ct) + ct.type(start)
    c.store(vals)
    return c.event()


def simd_cmp(c: SimdCommand) -> CommandEvent:
    op = _subop(CmpOp, c.d.subop, c.d.op)
    if c.d.dtype_out != DType.I1:
        raise IllegalCommandError(f"SIMD_CMP writes I1, got dtype_out {c.d.dtype_out.name}")
    dt0 = c.d.dtype_in0 if c.d.dtype_in0 != DType.NONE else None
    if dt0 is None:
        raise IllegalCommandError("SIMD_CMP needs dtype_in0 (the type compared)")
    dt1 = c.d.dtype_in1 if c.d.dtype_in1 != DType.NONE else dt0
    a, b = np.asarray(c.src(0, dt0)), np.asarray(c.src(1, dt1))
    if dt0 in FLOATS or dt1 in FLOATS:
        a, b = a.astype(np.float64), b.astype(np.float64)
    elif c.unsigned or a.dtype.kind == "u" or b.dtype.kind == "u":
        a, b = dtypes.as_unsigned(a).astype(np.uint64), dtypes.as_unsigned(b).astype(np.uint64)
    else:
        a, b = a.astype(np.int64), b.astype(np.int64)
    c.store(CMP[op](a, b))
    return c.event()


HANDLERS: dict[Op, Callable[[SimdCommand], CommandEvent]] = {
    Op.SIMD_UNARY: simd_unary, Op.SIMD_BINARY: simd_binary, Op.SIMD_SELECT: simd_select,
    Op.SIMD_FMA: simd_fma, Op.SIMD_CAST: simd_cast, Op.SIMD_FILL: simd_fill, Op.SIMD_IOTA: simd_iota,
    Op.SIMD_CMP: simd_cmp,
}


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    """Run one SIMD command on the arenas."""
    return HANDLERS[desc.op](SimdCommand(desc, mem, pe))


_REPLAY_FLAGS = _SRC0_IMM | _SRC1_IMM | int(Flags.IMM_IS_INT)


def replay(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> Callable[[], None] | None:
    """A closure redoing this SIMD command on its operand views, for the common case: UNARY/BINARY
    whose operands are stored in their compute type (e.g. all F32, all I32) and SIMD_FILL; None
    otherwise (the caller re-executes those in full). Its CommandEvent never changes."""
    c = SimdCommand(desc, mem, pe)
    out = desc.dtype_out
    if desc.op == Op.SIMD_FILL:
        value = convert(c._imm(desc.imm0, out), out)
        dst = c.tally.view("dst", desc.dst, out, c.shape, desc.dst_stride, write=True)

        def fill() -> None:
            dst[...] = value
        return with_ops(fill, FillOp(dst, value))
    if desc.op not in (Op.SIMD_UNARY, Op.SIMD_BINARY) or c.flags & ~_REPLAY_FLAGS or out == DType.I1:
        return None
    ct = compute_dtype(out)
    nargs = 1 if desc.op == Op.SIMD_UNARY else 2
    if dtypes.np_dtype(out) != ct or any(c.in_dtype(k) != out for k in range(nargs)):
        return None
    op = _subop(SimdOp, desc.subop, desc.op)
    if op in (SimdOp.ISNAN, SimdOp.ISINF):
        return None
    fn: Callable[..., Array] = _unary_fn(c, op, ct.kind) if nargs == 1 else _binary_fn(c, op, ct.kind)
    args = [c.compute(k) for k in range(nargs)]  # views (or immediates) already in the compute type
    dst = c.tally.view("dst", desc.dst, out, c.shape, desc.dst_stride, write=True)
    if (isinstance(fn, np.ufunc) and fn.nin == nargs and fn.nout == 1 and dst.flags.c_contiguous
            and fn(*args).dtype == dst.dtype):
        return with_ops(functools.partial(fn, *args, out=dst), UfuncOp(fn, tuple(args), dst))

    def general() -> None:
        dst[...] = convert(fn(*args), out)
    return general

