"""SIMD engine against numpy, driven by descriptors."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from mtia_sim import IllegalCommandError, Simulator
from mtia_sim.isa import CastMode, CmpOp, DType, Flags, Op, SimdOp
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.units.dtypes import encode_immediate
from tests.sim.units_helpers import get, put, strides_of

SHAPE = (4, 33)
S = strides_of(SHAPE)
DIMS = D.dims(list(SHAPE))


def run(sim, op, subop, out_dt, srcs, in_dts=(), flags=Flags.NONE, imm0=0, imm1=0, out_np=None, shape=SHAPE):
    offs = [0x100 * 0, 0x4000, 0x8000]
    addrs = [put(sim, s, offs[i]) if s is not None else 0 for i, s in enumerate(srcs)]
    st = strides_of(shape)
    ins = list(in_dts) + [DType.NONE] * (3 - len(in_dts))
    d = D(op, subop=subop, flags=flags, dtype_out=out_dt, dtype_in0=ins[0], dtype_in1=ins[1], dtype_in2=ins[2],
          dst=put(sim, np.zeros(1, np.uint8), 0xC000), src0=addrs[0] if len(addrs) > 0 else 0,
          src1=addrs[1] if len(addrs) > 1 else 0, src2=addrs[2] if len(addrs) > 2 else 0,
          shape=D.dims(list(shape)), dst_stride=st, src0_stride=st, src1_stride=st, src2_stride=st,
          imm0=imm0, imm1=imm1)
    ev = sim.execute(d)
    from tests.sim.units_helpers import np_of
    return get(sim, 0xC000, shape, out_np or np_of(out_dt)), ev


RNG = np.random.default_rng(0)
A = RNG.standard_normal(SHAPE).astype(np.float32)
B = (RNG.standard_normal(SHAPE) + 3).astype(np.float32)

FLOAT_BINARY = {
    SimdOp.ADD: np.add, SimdOp.SUB: np.subtract, SimdOp.MUL: np.multiply, SimdOp.DIV: np.divide,
    SimdOp.REM: np.fmod, SimdOp.MIN: np.minimum, SimdOp.MAX: np.maximum, SimdOp.ATAN2: np.arctan2,
    SimdOp.POW: lambda a, b: np.power(np.abs(a), b), SimdOp.DIV_FLOOR: lambda a, b: np.floor(a / b),
}


@pytest.mark.parametrize("op", list(FLOAT_BINARY))
def test_float_binary(sim: Simulator, op: SimdOp) -> None:
    a = np.abs(A) if op == SimdOp.POW else A
    got, ev = run(sim, Op.SIMD_BINARY, op, DType.F32, [a, B])
    np.testing.assert_allclose(got, FLOAT_BINARY[op](a, B).astype(np.float32), rtol=1e-6)
    assert ev.elements == A.size and ev.flops == A.size


def test_half_types_round_once(sim: Simulator) -> None:
    for dt, npd in ((DType.F16, np.float16), (DType.BF16, ml_dtypes.bfloat16)):
        a, b = A.astype(npd), B.astype(npd)
        got, ev = run(sim, Op.SIMD_BINARY, SimdOp.ADD, dt, [a, b])
        np.testing.assert_array_equal(got, (a.astype(np.float32) + b.astype(np.float32)).astype(npd))
        assert ev.dtype_bytes == 2


def test_int_binary_c_semantics(sim: Simulator) -> None:
    a = np.array([[7, -7, 7, -7, 0, 100, -2**31, 5]], np.int32)
    b = np.array([[2, 2, -2, -2, 3, 7, -1, 0]], np.int32)
    shape = a.shape
    div, _ = run(sim, Op.SIMD_BINARY, SimdOp.DIV, DType.I32, [a, b], shape=shape)
    rem, _ = run(sim, Op.SIMD_BINARY, SimdOp.REM, DType.I32, [a, b], shape=shape)
    fdiv, _ = run(sim, Op.SIMD_BINARY, SimdOp.DIV_FLOOR, DType.I32, [a, b], shape=shape)
    assert div[0, :4].tolist() == [3, -3, -3, 3] and rem[0, :4].tolist() == [1, -1, 1, -1]
    assert fdiv[0, :4].tolist() == [3, -4, -4, 3]
    assert div[0, 6] == -2**31  # INT_MIN / -1 wraps
    shr, _ = run(sim, Op.SIMD_BINARY, SimdOp.SHR, DType.I32, [a, np.full(shape, 1, np.int32)], shape=shape)
    ushr, _ = run(sim, Op.SIMD_BINARY, SimdOp.SHR, DType.I32, [a, np.full(shape, 1, np.int32)], shape=shape,
                  flags=Flags.UNSIGNED)
    assert shr[0, 1] == -4 and ushr[0, 1] == (np.uint32(2**32 - 7) >> 1).astype(np.int32)
    udiv, _ = run(sim, Op.SIMD_BINARY, SimdOp.DIV, DType.I32, [a, b], shape=shape, flags=Flags.UNSIGNED)
    assert udiv[0, 1] == (2**32 - 7) // 2
    for op, fn in ((SimdOp.AND, np.bitwise_and), (SimdOp.OR, np.bitwise_or), (SimdOp.XOR, np.bitwise_xor),
                   (SimdOp.MIN, np.minimum), (SimdOp.MAX, np.maximum), (SimdOp.MUL, np.multiply)):
        got, _ = run(sim, Op.SIMD_BINARY, op, DType.I32, [a, b], shape=shape)
        np.testing.assert_array_equal(got, fn(a, b))
    shl, _ = run(sim, Op.SIMD_BINARY, SimdOp.SHL, DType.I64, [a.astype(np.int64), np.full(shape, 40, np.int64)],
                 shape=shape)
    np.testing.assert_array_equal(shl, a.astype(np.int64) << 40)


def test_immediates(sim: Simulator) -> None:
    got, _ = run(sim, Op.SIMD_BINARY, SimdOp.MUL, DType.F32, [A], flags=Flags.SRC1_IMM, imm1=encode_immediate(2.5))
    np.testing.assert_array_equal(got, A * np.float32(2.5))
    got, _ = run(sim, Op.SIMD_BINARY, SimdOp.SUB, DType.F32, [None, B], flags=Flags.SRC0_IMM,
                 imm0=encode_immediate(1.0))
    np.testing.assert_array_equal(got, np.float32(1) - B)
    ai = np.arange(A.size, dtype=np.int32).reshape(SHAPE)
    got, _ = run(sim, Op.SIMD_BINARY, SimdOp.SUB, DType.I32, [ai], flags=Flags.SRC1_IMM | Flags.IMM_IS_INT,
                 imm1=encode_immediate(-5))
    np.testing.assert_array_equal(got, ai + 5)


FLOAT_UNARY = {
    SimdOp.NEG: np.negative, SimdOp.ABS: np.abs, SimdOp.EXP: np.exp, SimdOp.EXP2: np.exp2,
    SimdOp.LOG: lambda x: np.log(np.abs(x)), SimdOp.LOG2: lambda x: np.log2(np.abs(x)),
    SimdOp.SQRT: lambda x: np.sqrt(np.abs(x)), SimdOp.RSQRT: lambda x: 1 / np.sqrt(np.abs(x)),
    SimdOp.SIGMOID: lambda x: 1 / (1 + np.exp(-x)), SimdOp.TANH: np.tanh,
    SimdOp.ERF: np.vectorize(math.erf), SimdOp.SIN: np.sin, SimdOp.COS: np.cos, SimdOp.FLOOR: np.floor,
    SimdOp.CEIL: np.ceil, SimdOp.RECIP: lambda x: 1 / x, SimdOp.ROUND: np.rint, SimdOp.TRUNC: np.trunc,
    SimdOp.LOG1P: lambda x: np.log1p(np.abs(x)), SimdOp.EXPM1: np.expm1, SimdOp.TAN: np.tan,
    SimdOp.ASIN: lambda x: np.arcsin(np.clip(x, -1, 1)), SimdOp.ACOS: lambda x: np.arccos(np.clip(x, -1, 1)),
    SimdOp.ATAN: np.arctan, SimdOp.SINH: np.sinh, SimdOp.COSH: np.cosh,
    SimdOp.GELU_TANH: lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
}
NEEDS_POSITIVE = {SimdOp.LOG, SimdOp.LOG2, SimdOp.SQRT, SimdOp.RSQRT, SimdOp.LOG1P}
NEEDS_UNIT = {SimdOp.ASIN, SimdOp.ACOS}


@pytest.mark.parametrize("op", list(FLOAT_UNARY))
def test_float_unary(sim: Simulator, op: SimdOp) -> None:
    x = A * 3
    if op in NEEDS_POSITIVE:
        x = np.abs(x)
    if op in NEEDS_UNIT:
        x = np.clip(A / 3, -1, 1).astype(np.float32)
    got, ev = run(sim, Op.SIMD_UNARY, op, DType.F32, [x])
    want = FLOAT_UNARY[op](x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    from mtia_sim.isa import TRANSCENDENTAL
    assert ev.transcendental == (op in TRANSCENDENTAL)


def test_isnan_isinf_and_int_unary(sim: Simulator) -> None:
    x = np.array([[1.0, np.nan, np.inf, -np.inf]], np.float32)
    got, _ = run(sim, Op.SIMD_UNARY, SimdOp.ISNAN, DType.I1, [x], in_dts=[DType.F32], shape=x.shape)
    assert got.tolist() == [[0, 1, 0, 0]]
    got, _ = run(sim, Op.SIMD_UNARY, SimdOp.ISINF, DType.I1, [x], in_dts=[DType.F32], shape=x.shape)
    assert got.tolist() == [[0, 0, 1, 1]]
    i = np.array([[5, -3, 0, 7]], np.int32)
    for op, fn in ((SimdOp.NEG, np.negative), (SimdOp.ABS, np.abs), (SimdOp.NOT, np.invert)):
        got, _ = run(sim, Op.SIMD_UNARY, op, DType.I32, [i], shape=i.shape)
        np.testing.assert_array_equal(got, fn(i))


def test_select_fma_fill_iota(sim: Simulator) -> None:
    cond = (A > 0).astype(np.uint8)
    got, _ = run(sim, Op.SIMD_SELECT, 0, DType.F32, [cond, A, B], in_dts=[DType.I1])
    np.testing.assert_array_equal(got, np.where(A > 0, A, B))
    C = RNG.standard_normal(SHAPE).astype(np.float32)
    got, ev = run(sim, Op.SIMD_FMA, 0, DType.F32, [A, B, C])
    np.testing.assert_allclose(got, A * B + C, rtol=1e-6, atol=1e-6)
    assert ev.flops == 2 * A.size
    got, _ = run(sim, Op.SIMD_FILL, 0, DType.BF16, [], imm0=encode_immediate(1.5))
    assert np.all(got.astype(np.float32) == 1.5)
    got, _ = run(sim, Op.SIMD_IOTA, 3, DType.I32, [], imm0=encode_immediate(10), flags=Flags.IMM_IS_INT)
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(10, 10 + SHAPE[1], dtype=np.int32), SHAPE))
    got, _ = run(sim, Op.SIMD_IOTA, 2, DType.F32, [], imm0=encode_immediate(0.0))
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(SHAPE[0], dtype=np.float32)[:, None], SHAPE))


def test_cast(sim: Simulator) -> None:
    x = np.array([[1.7, -1.7, 3e9, np.nan, 0.5, -0.5, 65504.0, 1e-3]], np.float32)
    got, _ = run(sim, Op.SIMD_CAST, CastMode.DEFAULT, DType.I32, [x], in_dts=[DType.F32], shape=x.shape)
    assert got[0, :2].tolist() == [1, -1] and got[0, 2] == 2**31 - 1 and got[0, 3] == 0
    got, _ = run(sim, Op.SIMD_CAST, CastMode.DEFAULT, DType.BF16, [A], in_dts=[DType.F32])
    np.testing.assert_array_equal(got, A.astype(ml_dtypes.bfloat16))
    got, _ = run(sim, Op.SIMD_CAST, CastMode.RTZ, DType.BF16, [A], in_dts=[DType.F32])
    assert np.all(np.abs(got.astype(np.float32)) <= np.abs(A))
    got, _ = run(sim, Op.SIMD_CAST, CastMode.RTZ, DType.F16, [A], in_dts=[DType.F32])
    assert np.all(np.abs(got.astype(np.float32)) <= np.abs(A))
    u = np.array([[0xFFFFFFFF, 1]], np.uint32).view(np.int32)
    got, _ = run(sim, Op.SIMD_CAST, 0, DType.F32, [u], in_dts=[DType.I32], flags=Flags.UNSIGNED, shape=u.shape)
    assert got[0, 0] == np.float32(4294967295.0)
    got, _ = run(sim, Op.SIMD_CAST, CastMode.BITCAST, DType.I32, [A], in_dts=[DType.F32])
    np.testing.assert_array_equal(got, A.view(np.int32))
    got, _ = run(sim, Op.SIMD_CAST, 0, DType.F8E4M3, [A], in_dts=[DType.F32])
    np.testing.assert_array_equal(got, A.astype(ml_dtypes.float8_e4m3fn))
    got, _ = run(sim, Op.SIMD_CAST, 0, DType.I8, [np.array([[300, -129]], np.int32)], in_dts=[DType.I32],
                 shape=(1, 2))
    assert got.tolist() == [[44, 127]]


@pytest.mark.parametrize("cmp", list(CmpOp))
def test_compare(sim: Simulator, cmp: CmpOp) -> None:
    fns = {CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal, CmpOp.LT: np.less, CmpOp.LE: np.less_equal,
           CmpOp.GT: np.greater, CmpOp.GE: np.greater_equal}
    b = np.where(RNG.random(SHAPE) < 0.3, A, B).astype(np.float32)
    got, _ = run(sim, Op.SIMD_CMP, cmp, DType.I1, [A, b], in_dts=[DType.F32])
    np.testing.assert_array_equal(got, fns[cmp](A, b).astype(np.uint8))
    i = np.array([[-1, 1, 2]], np.int32)
    got, _ = run(sim, Op.SIMD_CMP, cmp, DType.I1, [i], in_dts=[DType.I32], shape=i.shape,
                 flags=Flags.SRC1_IMM | Flags.IMM_IS_INT | Flags.UNSIGNED, imm1=encode_immediate(1))
    np.testing.assert_array_equal(got, fns[cmp](i.view(np.uint32), np.uint32(1)).astype(np.uint8))


def test_strided_transpose_and_broadcast(sim: Simulator) -> None:
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    row = RNG.standard_normal(8).astype(np.float32)
    pa, pr = put(sim, a, 0), put(sim, row, 0x1000)
    d = D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=DType.F32, dst=put(sim, np.zeros(40, np.float32), 0x2000),
          src0=pa, src1=pr, shape=D.dims([5, 8]), dst_stride=[0, 0, 8, 1], src0_stride=[0, 0, 1, 5],
          src1_stride=[0, 0, 0, 1])
    sim.execute(d)
    np.testing.assert_array_equal(get(sim, 0x2000, (5, 8), np.float32), a.T + row)


def test_illegal_simd(sim: Simulator) -> None:
    with pytest.raises(IllegalCommandError, match="SIMD_BINARY"):
        run(sim, Op.SIMD_BINARY, 99, DType.F32, [A, B])
    with pytest.raises(IllegalCommandError, match="XOR"):
        run(sim, Op.SIMD_BINARY, SimdOp.XOR, DType.F32, [A, B])
    with pytest.raises(IllegalCommandError, match="shape"):
        run(sim, Op.SIMD_BINARY, SimdOp.ADD, DType.F32, [A, B], shape=(0, 4))
