"""Tile-IR element types as MTIA descriptor dtypes and as LLVM scalar types on the control core."""

from __future__ import annotations

from llvmlite import ir as llvm_ir

from lowering.errors import UnsupportedError
from lowering.ir.types import FloatType, IndexType, IntType, PointerType, Type
from mtia_sim.isa import ITEMSIZE, DType

_FLOATS = {
    "f16": DType.F16,
    "bf16": DType.BF16,
    "f32": DType.F32,
    "f64": DType.F64,
    "f8E4M3FN": DType.F8E4M3,
    "f8E5M2": DType.F8E5M2,
}
_INTS = {1: DType.I1, 8: DType.I8, 16: DType.I16, 32: DType.I32, 64: DType.I64}


def to_dtype(t: Type, unsigned: bool = False) -> DType:
    """Descriptor dtype of the element type of `t` (pointers are U64 addresses)."""
    e = t.element_type
    if isinstance(e, PointerType):
        return DType.U64
    if isinstance(e, IndexType):
        return DType.I64
    if isinstance(e, IntType):
        if e.width not in _INTS:
            raise UnsupportedError(f"integer type i{e.width} has no MTIA dtype")
        d = _INTS[e.width]
        if unsigned and d in (DType.I8, DType.I16, DType.I32, DType.I64):
            return DType(int(d) + 1)
        return d
    if isinstance(e, FloatType):
        if e.name not in _FLOATS:
            raise UnsupportedError(f"float type {e.name} has no MTIA dtype", hint="use fp32, fp16 or bf16")
        return _FLOATS[e.name]
    raise UnsupportedError(f"element type {e} has no MTIA dtype")


def itemsize(t: Type) -> int:
    return ITEMSIZE[to_dtype(t)]


def is_float(t: Type) -> bool:
    return isinstance(t.element_type, FloatType)


def is_unsigned_dtype(d: DType) -> bool:
    return d in (DType.U8, DType.U16, DType.U32, DType.U64)


def core_type(t: Type) -> llvm_ir.Type:
    """How a scalar of type `t` lives in a core register: ints as iN, pointers as i64,
    f16/bf16/f32 as float (the core has no half-precision unit), f64 as double."""
    e = t.element_type
    if isinstance(e, PointerType):
        return llvm_ir.IntType(64)
    if isinstance(e, IndexType):
        return llvm_ir.IntType(64)
    if isinstance(e, IntType):
        return llvm_ir.IntType(e.width)
    if isinstance(e, FloatType):
        if e.name == "f64":
            return llvm_ir.DoubleType()
        if e.name in ("f16", "bf16", "f32"):
            return llvm_ir.FloatType()
    raise UnsupportedError(f"scalar type {e} cannot live on the control core")
