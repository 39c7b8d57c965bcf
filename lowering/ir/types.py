"""Types of the tile IR: scalars (ints, floats, index), Triton pointers, tensors, tensor descriptors.

Every type answers the same questions, scalar or tensor: `shape` (``()`` for scalars),
`element_type` (the scalar inside a tensor, the type itself for a scalar), `is_pointer`
(the element is a `!tt.ptr`), `rank`, `numel`. ``str(t)`` is the MLIR spelling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Type",
    "IntType",
    "FloatType",
    "IndexType",
    "NoneType",
    "PointerType",
    "TensorType",
    "TensorDescType",
    "FunctionType",
    "OpaqueType",
    "FLOAT_TYPE_NAMES",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "f16",
    "bf16",
    "f32",
    "f64",
    "index",
    "scalar_type_from_name",
    "with_element_type",
    "with_shape",
]

#: Float element types Triton 3.6 prints in TTIR, with their bit widths.
FLOAT_TYPE_NAMES: dict[str, int] = {
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "tf32": 19,
    "f8E4M3FN": 8,
    "f8E5M2": 8,
    "f8E4M3FNUZ": 8,
    "f8E5M2FNUZ": 8,
    "f8E4M3B11FNUZ": 8,
    "f8E4M3": 8,
    "f8E3M4": 8,
    "f8E8M0FNU": 8,
    "f6E2M3FN": 6,
    "f6E3M2FN": 6,
    "f4E2M1FN": 4,
}


class Type:
    """Base of all tile-IR types (immutable, hashable, compared by value)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor shape; ``()`` for a scalar."""
        return ()

    @property
    def element_type(self) -> Type:
        """The scalar type of one element (the type itself for scalars)."""
        return self

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_tensor(self) -> bool:
        return False

    @property
    def is_pointer(self) -> bool:
        """True when the element type is a Triton pointer (scalar pointer or tensor of pointers)."""
        return isinstance(self.element_type, PointerType)

    @property
    def is_int(self) -> bool:
        return isinstance(self.element_type, IntType)

    @property
    def is_float(self) -> bool:
        return isinstance(self.element_type, FloatType)

    @property
    def bitwidth(self) -> int:
        """Bits of one element (pointers count 64)."""
        raise TypeError(f"type {self} has no bit width")


@dataclass(frozen=True)
class IntType(Type):
    """Signless integer ``iN`` (``i1`` is the boolean)."""

    width: int

    def __str__(self) -> str:
        return f"i{self.width}"

    @property
    def bitwidth(self) -> int:
        return self.width


@dataclass(frozen=True)
class FloatType(Type):
    """A float type by its MLIR name: ``f16``, ``bf16``, ``f32``, ``f64``, fp8 (``f8E4M3FN``, ...)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in FLOAT_TYPE_NAMES:
            raise ValueError(f"unknown float type {self.name!r}; known: {', '.join(FLOAT_TYPE_NAMES)}")

    def __str__(self) -> str:
        return self.name

    @property
    def bitwidth(self) -> int:
        return FLOAT_TYPE_NAMES[self.name]


@dataclass(frozen=True)
class IndexType(Type):
    """MLIR ``index``."""

    def __str__(self) -> str:
        return "index"

    @property
    def bitwidth(self) -> int:
        return 64


@dataclass(frozen=True)
class NoneType(Type):
    """MLIR ``none``."""

    def __str__(self) -> str:
        return "none"


@dataclass(frozen=True)
class PointerType(Type):
    """``!tt.ptr<pointee>`` (address space 1 is the default, global memory).

    The pointee is a scalar type, or a `TensorType` for a block pointer (``tt.make_tensor_ptr``).
    """

    pointee: Type
    address_space: int = 1

    def __str__(self) -> str:
        if self.address_space != 1:
            return f"!tt.ptr<{self.pointee}, {self.address_space}>"
        return f"!tt.ptr<{self.pointee}>"

    @property
    def bitwidth(self) -> int:
        return 64

    @property
    def is_block_pointer(self) -> bool:
        return isinstance(self.pointee, TensorType)


@dataclass(frozen=True)
class TensorType(Type):
    """``tensor<d0 x d1 x ... x element>``; `encoding` is kept as text (TTIR has none)."""

    dims: tuple[int, ...]
    element: Type
    encoding: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.element, TensorType):
            raise ValueError("a tensor's element type cannot be a tensor")
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.dims)
        enc = f", {self.encoding}" if self.encoding else ""
        return f"tensor<{dims}{self.element}{enc}>"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    @property
    def element_type(self) -> Type:
        return self.element

    @property
    def is_tensor(self) -> bool:
        return True

    @property
    def bitwidth(self) -> int:
        return self.element.bitwidth


@dataclass(frozen=True)
class TensorDescType(Type):
    """``!tt.tensordesc<tensor<...>>``: a TMA-style tensor descriptor; `block` is the tile type."""

    block: TensorType

    def __str__(self) -> str:
        return f"!tt.tensordesc<{self.block}>"


@dataclass(frozen=True)
class FunctionType(Type):
    """``(inputs) -> results``."""

    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            return f"({ins}) -> {self.results[0]}"
        return f"({ins}) -> ({', '.join(map(str, self.results))})"


@dataclass(frozen=True)
class OpaqueType(Type):
    """A dialect type the IR does not model (kept as text, e.g. ``!ttg.memdesc<...>``)."""

    text: str

    def __str__(self) -> str:
        return self.text


i1 = IntType(1)
i8 = IntType(8)
i16 = IntType(16)
i32 = IntType(32)
i64 = IntType(64)
f16 = FloatType("f16")
bf16 = FloatType("bf16")
f32 = FloatType("f32")
f64 = FloatType("f64")
index = IndexType()


def scalar_type_from_name(name: str) -> Type:
    """``"i32"`` → `IntType(32)`, ``"bf16"`` → `FloatType("bf16")`, ``"index"``, ``"none"``."""
    if name == "index":
        return index
    if name == "none":
        return NoneType()
    if name in FLOAT_TYPE_NAMES:
        return FloatType(name)
    if name.startswith("i") and name[1:].isdigit():
        return IntType(int(name[1:]))
    raise ValueError(f"unknown scalar type {name!r}")


def with_element_type(t: Type, element: Type) -> Type:
    """`t` with its element type replaced (a scalar becomes `element`, a tensor keeps its shape)."""
    if isinstance(t, TensorType):
        return TensorType(t.dims, element, t.encoding)
    return element


def with_shape(element: Type, shape: tuple[int, ...]) -> Type:
    """A tensor of `shape` over `element`, or `element` itself for shape ``()``."""
    return TensorType(tuple(shape), element) if shape else element
