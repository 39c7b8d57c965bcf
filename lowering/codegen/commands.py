"""Issuing unit commands from the control code: a command descriptor's fields as volatile stores,
rank > 4 index spaces folded or split, immediates, fills, copies and scalar reads of local data.
`CommandIssuer` is a base of `lowering.codegen.lower.KernelLowering`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

from lowering.codegen import dtypes as dt
from lowering.codegen.emitter import I32, I64, CoreEmitter, Word
from lowering.codegen.local_alloc import Buffer
from lowering.codegen.values import Buf, Splat
from lowering.errors import UnsupportedError
from mtia_sim import isa
from mtia_sim.isa import DType, Field, Flags, Op

if TYPE_CHECKING:
    from lowering.ir.core import Operation, Value

Operand = Buf | tuple[Word, Sequence[Word]]  # a local-store view, or (address, element strides)


def _coalesce(
    op: Op, shape: list[Word], dst: Operand | None, srcs: list[Operand | None], axis: int
) -> tuple[list[Word], Operand | None, list[Operand | None], int]:
    """Fold the index space of a rank > 4 command: drop size-1 dims, merge neighbours that are
    contiguous in every operand (never across a reduction axis). Unchanged when not foldable."""
    ops = [x for x in [dst, *srcs] if x is not None]
    if op == Op.SIMD_IOTA or not all(isinstance(x, Buf) for x in ops):
        return shape, dst, srcs, axis
    bufs: list[Buf] = [x for x in ops if isinstance(x, Buf)]
    reduce = op in (Op.RED_REDUCE, Op.RED_SCAN)
    dims = [i for i, d in enumerate(shape) if d != 1 or (reduce and i == axis)]
    merged: list[list[int]] = []
    for i in dims:
        if merged:
            j = merged[-1][-1]
            fixed = reduce and (i == axis or j == axis)
            if not fixed and all(b.strides[j] == b.strides[i] * shape[i] for b in bufs):
                merged[-1].append(i)
                continue
        merged.append([i])
    new_shape = [math.prod(shape[i] for i in g) for g in merged] or [1]

    def fold(x: Operand | None) -> Operand | None:
        if not isinstance(x, Buf):
            return x
        strides = tuple(x.strides[g[-1]] for g in merged) or (0,)
        return x.view(tuple(new_shape), strides)

    new_axis = next((k for k, g in enumerate(merged) if axis in g), 0)
    return new_shape, fold(dst), [fold(x) for x in srcs], new_axis


class CommandIssuer:
    """The command-issuing half of `KernelLowering` (which provides the emitter and operand lookups)."""

    em: CoreEmitter
    b: ir.IRBuilder
    # local-store buffer (by id) -> (the buffer, mask of the units whose commands write it anywhere
    # in the function); and each scalar read's fence with the buffer it reads (`resolve_fences`)
    unit_writes: dict[int, tuple[Buffer, int]]
    scalar_fences: list[tuple[ir.Constant, Buffer]]

    # provided by KernelLowering
    def tag(self, op: Operation | None = None) -> int:
        raise NotImplementedError

    def operand(self, x: Operand, rank_shape: int) -> tuple[Word, list[Word]]:
        raise NotImplementedError

    def local_addr(self, x: Buf) -> Word:
        raise NotImplementedError

    def new_buf(self, v: Value | None, shape: tuple[int, ...], dtype: DType, name: str | None = None) -> Buf:
        raise NotImplementedError

    def command(
        self,
        op: Op,
        *,
        shape: Sequence[Word],
        dst: Operand | None = None,
        srcs: Sequence[Operand | None] = (),
        dtypes: Sequence[DType] = (),
        subop: int = 0,
        flags: int = 0,
        axis: int = 0,
        valid: Sequence[Word] | None = None,
        imm0: Word = 0,
        imm1: Word = 0,
        raw_dims: bool = False,
    ) -> None:
        """Issue one command over index space `shape` (right-aligned to 4 dims unless raw_dims)."""
        rank = len(shape)
        if rank > isa.MAX_DIMS and not raw_dims and valid is None:
            shape, dst, srcs, axis = _coalesce(op, list(shape), dst, list(srcs), axis)
            rank = len(shape)
        if rank > isa.MAX_DIMS and not raw_dims and valid is None:
            self._split_command(op, shape, dst, srcs, dtypes, subop, flags, axis, imm0, imm1)
            return
        if rank > isa.MAX_DIMS:
            raise UnsupportedError(f"tensors of rank {rank} exceed the units' {isa.MAX_DIMS} dimensions")
        pad = 0 if raw_dims else isa.MAX_DIMS - rank
        f: dict[int, Word] = {
            Field.OP: int(op),
            Field.SUBOP: int(subop),
            Field.FLAGS: int(flags),
            Field.AXIS: axis + pad,
            Field.TAG: self.tag(),
        }
        dts = [int(d) for d in dtypes] + [0] * (4 - len(dtypes))
        f[Field.DTYPES] = dts[0] | dts[1] << 8 | dts[2] << 16 | dts[3] << 24
        for i, s in enumerate([1] * pad + list(shape)):
            f[Field.SHAPE + i] = s
        if valid is not None:
            for i, s in enumerate([1] * pad + list(valid)):
                f[Field.VALID + i] = s
        if dst is not None:
            addr, strides = self.operand(dst, rank) if not raw_dims else self._raw(dst)
            f[Field.DST] = addr
            for i, s in enumerate(strides):
                f[Field.DST_STRIDE + i] = s
        for k, src in enumerate(srcs):
            if src is None:
                continue
            addr, strides = self.operand(src, rank) if not raw_dims else self._raw(src)
            f[Field.SRC0 + k] = addr
            for i, s in enumerate(strides):
                f[Field.SRC0_STRIDE + 4 * k + i] = s
        f[Field.IMM0] = imm0
        f[Field.IMM1] = imm1
        if isinstance(dst, Buf):
            self.note_write(dst, op)
        self.em.command(f)

    def note_write(self, dst: Buf, op: Op) -> None:
        """Record that a command `op` writes `dst`'s buffer (commands whose destination is passed as
        a raw address call this themselves)."""
        buffer, mask = self.unit_writes.get(id(dst.buffer), (dst.buffer, 0))
        self.unit_writes[id(buffer)] = (buffer, mask | 1 << int(op.unit))

    def _split_command(
        self,
        op: Op,
        shape: Sequence[Word],
        dst: Operand | None,
        srcs: Sequence[Operand | None],
        dtypes: Sequence[DType],
        subop: int,
        flags: int,
        axis: int,
        imm0: Word,
        imm1: Word,
    ) -> None:
        """A rank > 4 command the units cannot take: one command per index of an outer dimension."""
        reduce = op in (Op.RED_REDUCE, Op.RED_SCAN)
        k = next(i for i in range(len(shape)) if not (reduce and i == axis))
        operands = [x for x in [dst, *srcs] if x is not None]
        n = int(shape[k])
        if (
            not all(isinstance(x, Buf) and x.dyn_base is None for x in operands)
            or n > 64
            or op == Op.SIMD_IOTA
        ):
            raise UnsupportedError(
                f"tensors of rank {len(shape)} exceed the units' {isa.MAX_DIMS} dimensions",
                hint="reshape to at most 4 dimensions",
            )
        rest = [d for i, d in enumerate(shape) if i != k]

        def part(x: Operand | None, i: int) -> Operand | None:
            if not isinstance(x, Buf):
                return x
            strides = tuple(s for j, s in enumerate(x.strides) if j != k)
            return x.view(tuple(rest), strides, byte_offset=i * x.strides[k] * isa.ITEMSIZE[x.dtype])

        for i in range(n):
            self.command(
                op,
                shape=rest,
                dst=part(dst, i),
                srcs=[part(x, i) for x in srcs],
                dtypes=dtypes,
                subop=subop,
                flags=flags,
                axis=axis - (1 if reduce and axis > k else 0),
                imm0=imm0,
                imm1=imm1,
            )

    def _raw(self, x: Operand) -> tuple[Word, list[Word]]:
        if isinstance(x, Buf):
            return self.local_addr(x), list(x.strides) + [0] * (4 - len(x.strides))
        return x[0], list(x[1]) + [0] * (4 - len(x[1]))

    # -- common command shapes ----------------------------------------------------------------
    def imm(self, x: ir.Value, dtype: DType) -> ir.Value:
        """A scalar as an immediate word for a command over `dtype` (float64 bits or int64)."""
        b = self.b
        if dtype in (DType.F16, DType.BF16, DType.F32, DType.F64, DType.F8E4M3, DType.F8E5M2):
            if isinstance(x.type, ir.IntType):
                x = b.sitofp(x, ir.DoubleType())
            if isinstance(x.type, ir.FloatType):
                x = b.fpext(x, ir.DoubleType())
            return b.bitcast(x, I64)
        if isinstance(x.type, ir.FloatType | ir.DoubleType):
            x = b.fptosi(x, I64)
        if x.type.width == 64:
            return x
        if x.type.width == 1 or dt.is_unsigned_dtype(dtype):
            return b.zext(x, I64)
        return b.sext(x, I64)

    @staticmethod
    def imm_flags(dtype: DType) -> int:
        is_f = dtype in (DType.F16, DType.BF16, DType.F32, DType.F64, DType.F8E4M3, DType.F8E5M2)
        return 0 if is_f else int(Flags.IMM_IS_INT)

    def fill(self, dst: Buf, value: ir.Value, dtype: DType) -> None:
        self.command(
            Op.SIMD_FILL,
            shape=dst.shape,
            dst=dst,
            dtypes=(dtype,),
            imm0=self.imm(value, dtype),
            flags=self.imm_flags(dtype),
        )

    def copy(self, dst: Buf, src: Buf) -> None:
        """dst <- src (same shape) through the memory-layout unit."""
        self.command(Op.MLU_COPY, shape=dst.shape, dst=dst, srcs=(src,), dtypes=(dst.dtype, src.dtype))

    def store_into(self, dst: Buf, x: Buf | Splat) -> None:
        if isinstance(x, Splat):
            self.fill(dst, x.scalar, dst.dtype)
        elif x.buffer is not dst.buffer or x.strides != dst.strides or x.dyn_base is not dst.dyn_base:
            self.copy(dst, x)

    def read_scalar(self, src: Buf, ty: ir.Type) -> ir.Value:
        """Fence the units that write `src`, then load element 0 of `src` on the core.

        The fence waits only for the units whose commands write `src`'s buffer anywhere in the
        function (`resolve_fences`): a unit is idle once its commands have run, and a command runs
        only after every earlier command that writes or reads bytes it writes (the command
        processor's hazard tracking), so `src`'s last writer and everything it waited for are done.
        A prefetch or store still in flight on another unit does not hold the core."""
        b = self.b
        if src.dtype in (DType.F16, DType.BF16):  # the cast waits for src's writer (a RAW hazard)
            tmp = self.new_buf(None, (1,), DType.F32)
            self.command(
                Op.SIMD_CAST, shape=(1,), dst=tmp, srcs=(src.view((1,), (0,)),), dtypes=(DType.F32, src.dtype)
            )
            src = tmp
        self.scalar_fences.append((self.em.fence_later(), src.buffer))
        local = self.local_addr(src)
        addr = local if isinstance(local, ir.Value) else I64(local)
        mem_ty = {
            DType.I1: ir.IntType(8),
            DType.I8: ir.IntType(8),
            DType.U8: ir.IntType(8),
            DType.I16: ir.IntType(16),
            DType.U16: ir.IntType(16),
            DType.I32: I32,
            DType.U32: I32,
            DType.I64: I64,
            DType.U64: I64,
            DType.F32: ir.FloatType(),
            DType.F64: ir.DoubleType(),
        }
        mt = mem_ty[src.dtype]
        from lowering.codegen.emitter import volatile_load

        val = volatile_load(b, b.inttoptr(addr, mt.as_pointer()), mt)
        if isinstance(ty, ir.IntType) and isinstance(mt, ir.IntType):
            if ty.width == 1:
                return b.icmp_unsigned("!=", val, mt(0))
            if ty.width < mt.width:
                return b.trunc(val, ty)
            if ty.width > mt.width:
                return b.zext(val, ty) if dt.is_unsigned_dtype(src.dtype) else b.sext(val, ty)
            return val
        if isinstance(ty, ir.FloatType) and isinstance(mt, ir.DoubleType):
            return b.fptrunc(val, ty)
        if isinstance(ty, ir.DoubleType) and isinstance(mt, ir.FloatType):
            return b.fpext(val, ty)
        return val

    def resolve_fences(self) -> None:
        """Set each scalar read's fence to the units that write its buffer (all units where no
        command writes it: a buffer written only by the core's own stores needs none, but all is
        the safe answer for anything this bookkeeping does not see)."""
        for const, buffer in self.scalar_fences:
            _, mask = self.unit_writes.get(id(buffer), (buffer, int(isa.UnitMask.ALL)))
            const.constant = mask

    # -- scalar helpers -----------------------------------------------------------------------
