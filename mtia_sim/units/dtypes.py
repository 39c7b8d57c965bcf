"""Element types: numpy dtypes for the isa codes, compute types, immediates and storage casts."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np

from mtia_sim.errors import IllegalCommandError
from mtia_sim.isa import DType, Flags

NP_DTYPE: dict[DType, np.dtype] = {
    DType.I1: np.dtype(np.uint8),  # one byte, 0 or 1 (read as "!= 0")
    DType.I8: np.dtype(np.int8), DType.U8: np.dtype(np.uint8),
    DType.I16: np.dtype(np.int16), DType.U16: np.dtype(np.uint16),
    DType.I32: np.dtype(np.int32), DType.U32: np.dtype(np.uint32),
    DType.I64: np.dtype(np.int64), DType.U64: np.dtype(np.uint64),
    DType.F16: np.dtype(np.float16), DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.F32: np.dtype(np.float32), DType.F64: np.dtype(np.float64),
    DType.F8E4M3: np.dtype(ml_dtypes.float8_e4m3fn), DType.F8E5M2: np.dtype(ml_dtypes.float8_e5m2),
}

FLOATS = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64, DType.F8E4M3, DType.F8E5M2})
SIGNED = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})
UNSIGNED = frozenset({DType.U8, DType.U16, DType.U32, DType.U64, DType.I1})
INTS = SIGNED | UNSIGNED

_TO_UNSIGNED: dict[np.dtype, np.dtype] = {
                np.dtype(np.int8): np.dtype(np.uint8), np.dtype(np.int16): np.dtype(np.uint16),
                np.dtype(np.int32): np.dtype(np.uint32), np.dtype(np.int64): np.dtype(np.uint64)}


def np_dtype(dt: DType, role: str = "operand") -> np.dtype:
    """The numpy storage dtype of `dt`; IllegalCommandError for DType.NONE."""
    try:
        return NP_DTYPE[dt]
    except KeyError:
        raise IllegalCommandError(f"{role} needs an element type, got {dt.name}") from None


def is_float(dt: DType) -> bool:
    return dt in FLOATS


def compute_dtype(dt: DType, unsigned: bool = False) -> np.dtype:
    """Type arithmetic is done in: fp32 for floats up to 32 bits, fp64 for F64, integers as stored
    (reinterpreted as unsigned with Flags.UNSIGNED)."""
    if dt in FLOATS:
        return np.dtype(np.float64) if dt == DType.F64 else np.dtype(np.float32)
    if dt == DType.I1:
        return np.dtype(np.uint8)
    npd = np_dtype(dt)
    return _TO_UNSIGNED.get(npd, npd) if unsigned else npd


def as_unsigned(values: np.ndarray) -> np.ndarray:
    """Reinterpret a signed integer array as unsigned of the same width (no copy)."""
    u = _TO_UNSIGNED.get(values.dtype)
    return values.view(u) if u is not None else values


def load(view: np.ndarray, dt: DType, unsigned: bool = False) -> np.ndarray:
    """Values of a storage view: I1 as bool, signed ints as unsigned when asked."""
    if dt == DType.I1:
        return view != 0
    if unsigned and dt in SIGNED:
        return as_unsigned(view)
    return view


def immediate(bits: int, flags: Flags) -> int | float:
    """Decode a 64-bit immediate: int64 with Flags.IMM_IS_INT, else float64 bits."""
    bits &= 0xFFFF_FFFF_FFFF_FFFF
    if flags & Flags.IMM_IS_INT:
        return bits - (1 << 64) if bits >> 63 else bits
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def encode_immediate(value: int | float) -> int:
    """Inverse of `immediate` (ints as int64 bits, floats as float64 bits)."""
    if isinstance(value, bool | int | np.integer):
        return int(value) & 0xFFFF_FFFF_FFFF_FFFF
    return int(struct.unpack("<Q", struct.pack("<d", float(value)))[0])


_ML_FLOATS = (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
              np.dtype(ml_dtypes.float8_e5m2))


def _int_limits(npd: np.dtype) -> tuple[int, int]:
    info = np.iinfo(npd)
    return int(info.min), int(info.max)


def convert(values: np.ndarray | int | float, dt: DType, *, unsigned_src: bool = False) -> np.ndarray:
    """Convert values to the storage dtype of `dt` as C/Triton would: float->int truncates toward zero
    (saturating, NaN -> 0), int->float and float->float round to nearest even, integer->integer wraps,
    anything -> I1 is `!= 0` (stored as 0/1)."""
    arr = np.asarray(values)
    out = NP_DTYPE.get(dt)
    if arr.dtype == out and dt != DType.I1:
        return arr
    if unsigned_src and arr.dtype.kind == "i":
        arr = as_unsigned(arr)
    out = np_dtype(dt)
    if dt == DType.I1:
        return (arr != 0).astype(np.uint8)
    if dt in INTS and (arr.dtype.kind == "f" or arr.dtype in _ML_FLOATS):
        f = np.trunc(arr.astype(np.float64))
        lo, hi = _int_limits(out)
        f = np.nan_to_num(f, nan=0.0, posinf=hi, neginf=lo)
        f = np.clip(f, lo, hi)
        # float64 cannot hold every int64: clip to the largest float below the limit, then convert
        if out.itemsize == 8:
            big = np.nextafter(np.float64(hi), 0.0)
            return np.where(f >= hi, np.array(hi, out), np.clip(f, lo, big).astype(out))
        return f.astype(out)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if dt in INTS and arr.dtype.kind in "iu":
        return arr.astype(out, casting="unsafe")  # wraps modulo 2**bits
    if arr.dtype.kind in "iu" and (out in _ML_FLOATS or out == np.float16):
        return arr.astype(np.float64).astype(out)
    return arr.astype(out)
