"""The codes of the PE's command set: units, element types, opcodes, sub-operations and flags.

These are the integers a command descriptor carries (`mtia_sim.isa` lays out the descriptor and
re-exports every name here; its docstring states what each command does with them). The enums hash
like their int value, so `{DType.F32: x}[12]` works and hashing is fast.
"""

from __future__ import annotations

import enum


class _IntEnum(enum.IntEnum):
    """IntEnum hashing like its int value (Enum hashes the member name, which is slow and makes
    `{DType.F32: ...}[12]` miss); equality already follows the int."""

    __hash__ = int.__hash__


class _IntFlag(enum.IntFlag):
    __hash__ = int.__hash__


class Unit(_IntEnum):
    """The fixed-function units of a PE (plus the control core itself, for counters)."""

    CORE = 0
    DMA = 1  # fabric interface
    DPE = 2  # dot-product engine
    SIMD = 3  # SIMD engine
    RED = 4  # reduction engine
    MLU = 5  # memory layout unit


class UnitMask(_IntFlag):
    DMA = 1 << Unit.DMA
    DPE = 1 << Unit.DPE
    SIMD = 1 << Unit.SIMD
    RED = 1 << Unit.RED
    MLU = 1 << Unit.MLU
    ALL = DMA | DPE | SIMD | RED | MLU


class DType(_IntEnum):
    """Element types of tensor operands (codes in the descriptor's dtype bytes)."""

    NONE = 0
    I1 = 1  # stored as one byte, 0 or 1
    I8 = 2
    U8 = 3
    I16 = 4
    U16 = 5
    I32 = 6
    U32 = 7
    I64 = 8
    U64 = 9
    F16 = 10
    BF16 = 11
    F32 = 12
    F64 = 13
    F8E4M3 = 14
    F8E5M2 = 15


ITEMSIZE: dict[DType, int] = {
    DType.NONE: 0,
    DType.I1: 1,
    DType.I8: 1,
    DType.U8: 1,
    DType.I16: 2,
    DType.U16: 2,
    DType.I32: 4,
    DType.U32: 4,
    DType.I64: 8,
    DType.U64: 8,
    DType.F16: 2,
    DType.BF16: 2,
    DType.F32: 4,
    DType.F64: 8,
    DType.F8E4M3: 1,
    DType.F8E5M2: 1,
}


class Op(_IntEnum):
    """Command opcodes. The unit is `op >> 8`."""

    # DMA / fabric interface (unit 1)
    DMA_COPY = 0x100  # dst <- src0 over shape; indices >= valid[k] are not read: dst gets imm0 (fill);
    #                   when dst is outside the local store, indices >= valid[k] are not written
    DMA_GATHER = 0x101  # dst[i] <- *(dtype*)src1[i] where src2[i] (mask, I1; src2=0: all) else imm0
    #                     subop GatherForm.ROWS: src1 = one address per row of shape[3] elements
    DMA_SCATTER = 0x102  # *(dtype*)src1[i] <- src0[i] where src2[i] (mask) ; src1 holds U64 addresses
    DMA_ATOMIC = 0x103  # old[i]=*addr; *addr = subop(*addr, src0[i]) where mask; dst <- old (dst=0: none)
    #                     addresses in src1 (U64), mask in src2; subop: AtomicOp; CAS compares with imm0
    # Dot-product engine (unit 2)
    DPE_MATMUL = 0x200  # dst[M,N] = (flags & ACCUMULATE ? dst : 0) + src0[M,K] @ src1[K,N]
    #                     shape = (M, N, K, 1); generic rule: src0 strides [m, -, k, -],
    #                     src1 [-, n, k, -], dst [m, n, -, -] (see the docstring of mtia_sim.isa)
    # SIMD engine (unit 3)
    SIMD_UNARY = 0x300  # dst = subop(src0)                 (subop: SimdOp)
    SIMD_BINARY = 0x301  # dst = subop(src0, src1)          (src1 may be the immediate: flags & SRC1_IMM)
    SIMD_SELECT = 0x302  # dst = src0 ? src1 : src2         (src0 is I1)
    SIMD_FMA = 0x303  # dst = src0 * src1 + src2
    SIMD_CAST = 0x304  # dst(dtype_out) = convert(src0(dtype_in0)); subop: CastMode
    SIMD_FILL = 0x305  # dst = imm0                         (splat)
    SIMD_IOTA = 0x306  # dst[i0..i3] = imm0 + index along axis `subop` (make_range)
    SIMD_CMP = 0x307  # dst(I1) = cmp(src0, src1)           (subop: CmpOp; src1 may be imm)
    # Reduction engine (unit 4)
    RED_REDUCE = 0x400  # dst = reduce(src0) along axis (subop: ReduceOp); dst stride of that axis is 0
    RED_SCAN = 0x401  # dst = scan(src0) along axis (subop: ScanOp); flags & REVERSE scans backwards
    RED_ACCUMULATE = 0x402  # dst[i] = subop(dst[i], src0[i]) across PEs (subop: ReduceOp SUM/MAX/MIN/PROD,
    #                          AND/OR/XOR for ints); src0 in this PE's local store, dst anywhere (another
    #                          PE's window, SRAM, DRAM); atomic per command (see mtia_sim.isa)
    # Memory layout unit (unit 5)
    MLU_COPY = 0x500  # dst = src0 re-laid out by strides: transpose, broadcast, reshape, slice, concat
    MLU_BITCAST = 0x501  # dst = src0 bytes reinterpreted (same itemsize)

    @property
    def unit(self) -> Unit:
        return _UNIT_BY_CODE[self >> 8]


class Flags(_IntFlag):
    NONE = 0
    ACCUMULATE = 1 << 0  # DPE: add into dst
    SRC1_IMM = 1 << 1  # SIMD_BINARY/SIMD_CMP: src1 is imm1 (scalar), not a tensor
    SRC0_IMM = 1 << 2  # SIMD_BINARY/SIMD_CMP: src0 is imm0 (scalar), not a tensor
    REVERSE = 1 << 3  # RED_SCAN
    IMM_IS_INT = 1 << 4  # immediates are int64 bits (otherwise float64 bits)
    UNSIGNED = 1 << 5  # integer ops treat operands as unsigned (div, rem, shr, cmp, max/min, cast)
    PROPAGATE_NAN = 1 << 6  # max/min propagate NaN (tl.maximum(propagate_nan=ALL))


class SimdOp(_IntEnum):
    # binary
    ADD = 1
    SUB = 2
    MUL = 3
    DIV = 4  # float div / integer div (trunc toward zero; floor-less, like C)
    REM = 5  # integer remainder (C semantics) / float fmod
    MIN = 6
    MAX = 7
    AND = 8
    OR = 9
    XOR = 10
    SHL = 11
    SHR = 12  # arithmetic for signed, logical with Flags.UNSIGNED
    POW = 13
    ATAN2 = 14
    DIV_FLOOR = 15  # python-style floor division (integers)
    # unary
    NEG = 32
    ABS = 33
    EXP = 34
    EXP2 = 35
    LOG = 36
    LOG2 = 37
    SQRT = 38
    RSQRT = 39
    SIGMOID = 40
    TANH = 41
    ERF = 42
    SIN = 43
    COS = 44
    FLOOR = 45
    CEIL = 46
    RECIP = 47
    NOT = 48  # bitwise not
    ROUND = 49  # round half to even
    TRUNC = 50
    LOG1P = 51
    EXPM1 = 52
    ISNAN = 53  # dst I1
    ISINF = 54  # dst I1
    TAN = 55
    ASIN = 56
    ACOS = 57
    ATAN = 58
    SINH = 59
    COSH = 60
    GELU_TANH = 61


TRANSCENDENTAL: frozenset[SimdOp] = frozenset(
    {
        SimdOp.EXP,
        SimdOp.EXP2,
        SimdOp.LOG,
        SimdOp.LOG2,
        SimdOp.SQRT,
        SimdOp.RSQRT,
        SimdOp.SIGMOID,
        SimdOp.TANH,
        SimdOp.ERF,
        SimdOp.SIN,
        SimdOp.COS,
        SimdOp.POW,
        SimdOp.ATAN2,
        SimdOp.DIV,
        SimdOp.RECIP,
        SimdOp.LOG1P,
        SimdOp.EXPM1,
        SimdOp.TAN,
        SimdOp.ASIN,
        SimdOp.ACOS,
        SimdOp.ATAN,
        SimdOp.SINH,
        SimdOp.COSH,
        SimdOp.GELU_TANH,
    }
)
"""Ops the SIMD engine evaluates through lookup tables + polynomial steps (slower than ALU ops)."""


class CmpOp(_IntEnum):
    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class CastMode(_IntEnum):
    DEFAULT = 0  # float->int truncates toward zero; int->float rounds to nearest; float->float RNE
    RTZ = 1  # float->float round toward zero
    BITCAST = 2


class ReduceOp(_IntEnum):
    SUM = 0
    MAX = 1
    MIN = 2
    PROD = 3
    ARGMAX = 4  # dst is I32 index of the first maximum along the axis
    ARGMIN = 5
    AND = 6
    OR = 7
    XOR = 8


class ScanOp(_IntEnum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3


class GatherForm(_IntEnum):
    """DMA_GATHER's subop: what the addresses in src1 point at."""

    ELEMENTS = 0  # one address per element
    ROWS = 1  # one address per row (index (i0, i1, i2, 0)); element j of the row at + j * itemsize


class AtomicOp(_IntEnum):
    ADD = 0
    MAX = 1
    MIN = 2
    XCHG = 3
    AND = 4
    OR = 5
    XOR = 6
    CAS = 7  # if *addr == imm0: *addr = src0[i]  (old value returned either way)


_UNIT_BY_CODE: dict[int, Unit] = {int(u): u for u in Unit}
