"""Building the control core's LLVM function: ABI arguments, command descriptors, doorbell, fences."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, TypeAlias

from llvmlite import ir

from lowering.codegen.target import DATALAYOUT, TRIPLE
from mtia_sim import isa

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()

Word: TypeAlias = Any  # an LLVM i64-convertible value or a Python int


class VolatileStore(ir.StoreInstr):
    """`store volatile` (llvmlite's builder has no volatile flag)."""

    def descr(self, buf: list[str]) -> None:
        tmp: list[str] = []
        super().descr(tmp)
        buf.append(tmp[0].replace("store ", "store volatile ", 1))


class VolatileLoad(ir.LoadInstr):
    """`load volatile`."""

    def descr(self, buf: list[str]) -> None:
        tmp: list[str] = []
        super().descr(tmp)
        buf.append(tmp[0].replace("load ", "load volatile ", 1))


def volatile_store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int = 8) -> None:
    st = VolatileStore(b.block, value, ptr)
    st.align = align
    b._insert(st)


def volatile_load(b: ir.IRBuilder, ptr: ir.Value, typ: ir.Type, name: str = "") -> ir.Value:
    ld = VolatileLoad(b.block, ptr, name=name, typ=typ)
    ld.align = 8
    b._insert(ld)
    return ld


def f64_bits(value: float) -> int:
    """The IEEE double bits of a Python float, as an unsigned 64-bit int."""
    return int(struct.unpack("<Q", struct.pack("<d", float(value)))[0])


def _same_word(a: ir.Value, b: ir.Value) -> bool:
    if a is b:
        return True
    if isinstance(a, ir.Constant) and isinstance(b, ir.Constant):
        return bool(a.type == b.type and a.constant == b.constant)
    return False


class CoreEmitter:
    """One kernel function with the MTIA kernel ABI and helpers to issue unit commands.

    ABI: `void NAME(u64 *args, i32 pid_x, i32 pid_y, i32 pid_z, i32 num_x, i32 num_y, i32 num_z)`.
    """

    def __init__(self, name: str) -> None:
        self.module = ir.Module(name=name)
        self.module.triple = TRIPLE
        self.module.data_layout = DATALAYOUT
        fnty = ir.FunctionType(ir.VoidType(), [I64.as_pointer()] + [I32] * 6)
        self.function = ir.Function(self.module, fnty, name=name)
        self.function.linkage = "external"
        args = self.function.args
        names = ("args", "pid_x", "pid_y", "pid_z", "num_x", "num_y", "num_z")
        for a, n in zip(args, names, strict=True):
            a.name = n
        self.args_ptr = args[0]
        self.program_ids = list(args[1:4])
        self.num_programs = list(args[4:7])
        entry = self.function.append_basic_block("entry")
        self.builder = ir.IRBuilder(entry)
        desc_ty = ir.ArrayType(I64, isa.DESC_WORDS)
        self.desc = self.builder.alloca(desc_ty, name="desc")
        self.desc.align = isa.DESC_ALIGNMENT
        self._desc_words = [
            self.builder.gep(self.desc, [I32(0), I32(i)], inbounds=True) for i in range(isa.DESC_WORDS)
        ]
        self.command_count = 0
        self._last_block: ir.Block | None = None
        self._last_words: list[ir.Value] = []

    # -- arguments -----------------------------------------------------------------------------
    def arg_slot(self, index: int) -> ir.Value:
        """The raw 64-bit slot of runtime argument `index`."""
        b = self.builder
        return b.load(b.gep(self.args_ptr, [I64(index)], inbounds=True), name=f"arg{index}")

    # -- words ---------------------------------------------------------------------------------
    def as_word(self, v: Word) -> ir.Value:
        """Any scalar (int constant, iN, float, double) as a 64-bit descriptor word."""
        b = self.builder
        if isinstance(v, int):
            return I64(v & 0xFFFF_FFFF_FFFF_FFFF)
        t = v.type
        if isinstance(t, ir.IntType):
            if t.width == 64:
                return v
            if t.width == 1:
                return b.zext(v, I64)
            return b.sext(v, I64)
        if isinstance(t, ir.FloatType | ir.HalfType):
            return b.bitcast(b.fpext(v, F64), I64)
        if isinstance(t, ir.DoubleType):
            return b.bitcast(v, I64)
        raise TypeError(f"cannot put a value of type {t} in a descriptor word")

    # -- commands ------------------------------------------------------------------------------
    def command(self, fields: Mapping[int, Word]) -> None:
        """Write a descriptor (word index -> value; others 0) and ring the doorbell.

        Within one basic block, words equal to the previous command's are not stored again (the
        command processor copies the descriptor at the doorbell; the stack copy keeps its words).
        """
        b = self.builder
        words = [self.as_word(fields.get(i, 0)) for i in range(isa.DESC_WORDS)]
        same_block = self._last_block is b.block
        for i, w in enumerate(words):
            if same_block and _same_word(w, self._last_words[i]):
                continue
            volatile_store(b, w, self._desc_words[i])
        self._last_block = b.block
        self._last_words = words
        addr = b.ptrtoint(self.desc, I64)
        self.mmio_write(isa.Reg.DOORBELL, addr)
        self.command_count += 1

    def mmio_write(self, reg: isa.Reg, value: Word) -> None:
        b = self.builder
        ptr = b.inttoptr(I64(isa.MMIO_BASE + int(reg)), I64.as_pointer())
        volatile_store(b, self.as_word(value), ptr)

    def mmio_read(self, reg: isa.Reg) -> ir.Value:
        b = self.builder
        ptr = b.inttoptr(I64(isa.MMIO_BASE + int(reg)), I64.as_pointer())
        return volatile_load(b, ptr, I64)

    def fence(self, mask: int | isa.UnitMask = isa.UnitMask.ALL) -> None:
        """Wait until the units in `mask` are idle (before the core touches their results)."""
        self.mmio_write(isa.Reg.FENCE, int(mask))

    def fence_later(self) -> ir.Constant:
        """A fence whose unit mask is decided after the whole function is lowered: the returned
        constant (all units until then) is the mask; set its `constant` before `finish`."""
        mask = I64(int(isa.UnitMask.ALL))
        self.mmio_write(isa.Reg.FENCE, mask)
        return mask

    def finish(self) -> str:
        """Terminate the function and return the module's LLVM IR text."""
        if not self.builder.block.is_terminated:
            self.builder.ret_void()
        for block in self.function.blocks:
            if not block.is_terminated:
                ir.IRBuilder(block).unreachable()
        return str(self.module)
