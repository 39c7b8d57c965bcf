"""Attribute values of the tile IR: plain Python values, with a few wrappers that keep MLIR's typing.

An op's ``attributes`` dict maps names to:

- ``bool``, ``str`` (enum keywords are stored as their keyword, e.g. ``"slt"``, ``"evict_last"``),
- `IntAttr` / `FloatAttr`: an ``int`` / ``float`` subclass that remembers its MLIR type
  (``0 : i32``); use them as ordinary numbers; a plain ``int`` prints as ``i32``, a plain ``float`` as
  ``f32``,
- ``list`` (MLIR ``[...]``), `DenseArray` (MLIR ``array<i32: 1, 0>``, a list subclass),
- ``dict`` (MLIR ``{...}``),
- `DenseAttr` (``dense<...> : tensor<...>``, its ``value`` is a numpy array of the tensor's shape),
- `Type` (a type attribute), `SymbolRef` (``@name``), `UnitAttr` (`UNIT`), `OpaqueAttr` (text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lowering.ir.types import FloatType, IntType, TensorType, Type, f32, i32

__all__ = [
    "IntAttr",
    "FloatAttr",
    "DenseArray",
    "DenseAttr",
    "SymbolRef",
    "UnitAttr",
    "UNIT",
    "OpaqueAttr",
    "AttrValue",
    "numpy_dtype",
    "attr_equal",
]


class IntAttr(int):
    """An integer attribute with its MLIR type (``16 : i32``). Behaves as an ``int``."""

    type: Type

    def __new__(cls, value: int, type: Type = i32) -> IntAttr:  # noqa: A002 - MLIR's word
        obj = super().__new__(cls, value)
        obj.type = type
        return obj

    def __repr__(self) -> str:
        return f"IntAttr({int(self)}, {self.type})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (IntAttr, (int(self), self.type))


class FloatAttr(float):
    """A float attribute with its MLIR type (``1.0 : f32``). Behaves as a ``float``."""

    type: Type

    def __new__(cls, value: float, type: Type = f32) -> FloatAttr:  # noqa: A002
        obj = super().__new__(cls, value)
        obj.type = type
        return obj

    def __repr__(self) -> str:
        return f"FloatAttr({float(self)!r}, {self.type})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FloatAttr, (float(self), self.type))


class DenseArray(list):  # type: ignore[type-arg]
    """MLIR ``array<i32: 1, 0>`` (a dense array of scalars). Behaves as a ``list``."""

    element_type: Type

    def __init__(self, values: Any = (), element_type: Type = i32) -> None:
        super().__init__(values)
        self.element_type = element_type

    def __repr__(self) -> str:
        return f"DenseArray({list(self)!r}, {self.element_type})"


@dataclass(frozen=True)
class SymbolRef:
    """``@name``: a reference to a function by symbol name."""

    name: str

    def __str__(self) -> str:
        return f"@{self.name}"


@dataclass(frozen=True)
class UnitAttr:
    """A present-or-absent flag (MLIR unit attribute, printed as the bare name)."""


UNIT = UnitAttr()


@dataclass(frozen=True)
class OpaqueAttr:
    """A dialect attribute the IR does not model, kept as its text (e.g. ``#arith.fastmath<none>``)."""

    text: str

    def __str__(self) -> str:
        return self.text


def numpy_dtype(t: Type) -> np.dtype[Any]:
    """The numpy dtype for a scalar element type (``bf16``/fp8 use ml_dtypes; ``i1`` is bool)."""
    if isinstance(t, IntType):
        return np.dtype({1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[t.width])
    if isinstance(t, FloatType):
        if t.name in ("f16", "f32", "f64"):
            return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[t.name])
        import ml_dtypes

        names = {
            "bf16": "bfloat16",
            "f8E4M3FN": "float8_e4m3fn",
            "f8E5M2": "float8_e5m2",
            "f8E4M3FNUZ": "float8_e4m3fnuz",
            "f8E5M2FNUZ": "float8_e5m2fnuz",
            "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
            "f8E4M3": "float8_e4m3",
            "f8E3M4": "float8_e3m4",
            "f8E8M0FNU": "float8_e8m0fnu",
            "f4E2M1FN": "float4_e2m1fn",
        }
        if t.name in names:
            return np.dtype(getattr(ml_dtypes, names[t.name]))
    if str(t) == "index":
        return np.dtype(np.int64)
    raise TypeError(f"no numpy dtype for element type {t}")


@dataclass(eq=False)
class DenseAttr:
    """``dense<...> : tensor<...>``: `value` is a numpy array with the tensor's shape and dtype.

    ``is_splat`` tells whether every element is the same (the common case: ``dense<0.0>``).
    """

    value: np.ndarray
    type: TensorType
    _splat: bool | None = field(default=None, repr=False)

    @property
    def is_splat(self) -> bool:
        if self._splat is None:
            flat = self.value.reshape(-1)
            self._splat = bool(
                flat.size == 0 or np.all(flat == flat[0]) or np.all(np.isnan(flat.astype(float)))
            )
        return self._splat

    @property
    def splat_value(self) -> Any:
        """The single value of a splat (a Python scalar)."""
        if not self.is_splat:
            raise ValueError(f"dense attribute of type {self.type} is not a splat")
        return self.value.reshape(-1)[0].item()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DenseAttr):
            return NotImplemented
        return (
            self.type == other.type
            and self.value.shape == other.value.shape
            and bool(np.array_equal(self.value.view(np.uint8), other.value.view(np.uint8)))
        )

    def __hash__(self) -> int:
        return hash((self.type, self.value.tobytes()))


AttrValue = (
    Any  # bool | int | float | str | list | dict | DenseAttr | Type | SymbolRef | UnitAttr | OpaqueAttr
)


def attr_equal(a: AttrValue, b: AttrValue) -> bool:
    """Attribute equality that also compares the MLIR types of typed ints/floats and NaN floats by bits."""
    if isinstance(a, IntAttr) or isinstance(b, IntAttr):
        return (
            isinstance(a, int)
            and isinstance(b, int)
            and int(a) == int(b)
            and getattr(a, "type", i32) == getattr(b, "type", i32)
        )
    if isinstance(a, float) and isinstance(b, float):
        same = a == b or (np.isnan(a) and np.isnan(b))
        return bool(same) and getattr(a, "type", f32) == getattr(b, "type", f32)
    if isinstance(a, DenseArray) or isinstance(b, DenseArray):
        return (
            isinstance(a, DenseArray)
            and isinstance(b, DenseArray)
            and a.element_type == b.element_type
            and list(a) == list(b)
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(attr_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(attr_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
        return False
    return bool(a == b)
