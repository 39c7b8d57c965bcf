"""How tile-IR values exist while the control code is generated.

- a scalar is an LLVM value in a core register;
- a tensor is a `Buf`: a view (address, shape, element strides, dtype) of a local-store `Buffer`;
- a uniform tensor (splat, dense constant) is a `Splat`: one scalar, materialised only when a
  command needs it as a tensor operand (SIMD ops take it as an immediate instead);
- `Symbolic` marks index/pointer/mask tensors consumed only by block DMA (never materialised).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from lowering.codegen.local_alloc import Buffer
from mtia_sim.isa import ITEMSIZE, LOCAL_BASE, DType

Scalar = ir.Value


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Contiguous element strides of `shape` (size-1 dims get stride 0)."""
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc if d != 1 else 0)
        acc *= d
    return tuple(reversed(strides))


@dataclass
class Buf:
    """A tensor in the local store: `buffer` + element `offset`, viewed with `shape`/`strides`."""

    buffer: Buffer
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType
    dyn_base: ir.Value | None = None  # runtime byte address (ring buffers); else static
    byte_offset: int = 0  # views into the middle of a buffer (split, join halves)

    @property
    def addr(self) -> ir.Value | int:
        if self.dyn_base is not None:
            if self.byte_offset:
                raise ValueError("offset views of multi-buffered tensors are not supported")
            return self.dyn_base
        return LOCAL_BASE + self.buffer.offset + self.byte_offset

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE[self.dtype]

    @property
    def is_dense(self) -> bool:
        """Contiguous row-major over the whole shape (writable in place)."""
        return self.strides == row_major(self.shape) and self.byte_offset == 0

    def view(
        self,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: DType | None = None,
        byte_offset: int = 0,
    ) -> Buf:
        return Buf(
            self.buffer, shape, strides, dtype or self.dtype, self.dyn_base, self.byte_offset + byte_offset
        )


@dataclass
class Splat:
    """A tensor whose elements all equal `scalar` (an LLVM value on the core)."""

    scalar: ir.Value
    shape: tuple[int, ...]
    dtype: DType


@dataclass
class Symbolic:
    """A tensor that only feeds block DMA addressing and masks; it has no buffer."""

    shape: tuple[int, ...]


Tensor = Buf | Splat | Symbolic


@dataclass
class TensorDescriptor:
    """A `tt.make_tensor_descriptor`: global base address, shape and strides (scalars on the core)."""

    base: ir.Value
    shape: list[ir.Value]
    strides: list[ir.Value]


@dataclass
class DeferredScalar:
    """A scalar a unit produced (a reduction) that still lives in a 1-element local-store buffer.

    Units consume it in place (a splat becomes a stride-0 view); the core reads it (fence + load)
    only when it really needs the value (control flow, address arithmetic)."""

    buf: Buf
    ty: ir.Type


Lowered = ir.Value | Buf | Splat | Symbolic | TensorDescriptor | DeferredScalar
