"""The programming model of the simulated MTIA PE: memory map, registers, ABI, command descriptors.

This module (with `mtia_sim.isa_codes`, the command set's codes, re-exported here) is the single
source of truth shared by the simulator (which decodes commands) and the compiler (`lowering/`,
which emits them). `knowledge/hardware/mtia/programming.md` is generated from / checked against it.

Memory map (one 64-bit address space; the same addresses for the core and for DMA):

    0x0000_F000  EXIT_ADDR      return address given to the kernel; reaching it ends the program
    0x0001_0000  CODE_BASE      the linked kernel image (text, rodata, data, bss), CODE_SIZE bytes
    0x0080_0000  STACK_BASE     the core's stack, STACK_SIZE bytes; sp starts at the top
    0x0400_0000  MMIO_BASE      command processor registers (see Reg)
    0x1000_0000  LOCAL_BASE     this PE's local store (size from the machine description)
    0x2000_0000  PE_WINDOW_BASE + pe * PE_WINDOW_STRIDE: PE `pe`'s local store (DMA only)
    0x8000_0000  SRAM_BASE      on-chip shared SRAM (size from the machine description)
    0x1_0000_0000 DRAM_BASE     off-chip DRAM

Kernel ABI (standard RISC-V LP64D calling convention):
    void kernel(uint64_t *args, int32 pid_x, int32 pid_y, int32 pid_z,
                int32 num_x, int32 num_y, int32 num_z)
    `args` holds one 64-bit slot per runtime argument in signature order: pointers as absolute
    addresses, integers sign-extended to 64 bits, floats as IEEE double bits. The kernel returns
    to EXIT_ADDR (set in ra) when done.

Issuing a command: build a `CommandDescriptor` (DESC_WORDS little-endian u64 words, 8-byte
aligned) anywhere the core can write (stack or local store), then store its address to
Reg.DOORBELL. The command processor copies the descriptor at once, so the memory may be reused
right after the store. Commands go to an in-order queue per unit; the command processor tracks
read/write address ranges in the local store, so a command starts only after every earlier
command it depends on (read-after-write, write-after-read, write-after-write) has finished.
Before the core reads or writes local-store data that units produce or consume, it stores a unit
mask to Reg.FENCE, which waits until those units are idle. Returning from the kernel waits for
all units.

Tensor operands: every tensor command works on an index space `shape[0..3]` (outermost first;
unused dims are 1). Operand X's element at index (i0, i1, i2, i3) lives at
    X.addr + (i0*X.stride[0] + i1*X.stride[1] + i2*X.stride[2] + i3*X.stride[3]) * itemsize(X.dtype)
with strides in elements (signed; 0 broadcasts). This one form expresses contiguous blocks,
slices, transposes, broadcasts and 1-D to 4-D strided DMA.

Operand rules the simulator enforces (precise statement of the above; added 2026-12 by the
functional-simulator owner, no name or value changed):
- Every shape entry is >= 1 (unused dims 1); a command's index space holds at most 2**28 elements.
  An operand's whole byte range must lie inside ONE memory (DRAM arena, SRAM, this PE's local
  store at LOCAL_BASE or a PE window): else LocalStoreOverflowError (local/window addresses) or
  MemoryFaultError.
- dtype_in0/1/2 == DType.NONE means "same as dtype_out" (SIMD_CMP must name dtype_in0; its
  dtype_out is I1). I1 is one byte, read as `!= 0`, written as 0/1.
- SIMD math is done as Triton would: floats up to 32 bits in fp32 and rounded once to dtype_out,
  F64 in fp64, integers in their own width with wrap-around; DIV/REM on integers truncate toward
  zero (C), DIV_FLOOR floors, REM on floats is fmod; MIN/MAX on floats ignore NaN unless
  Flags.PROPAGATE_NAN; SHL/SHR take the shift amount modulo the bit width. Flags.UNSIGNED makes
  signed integer inputs unsigned (div, rem, shr, cmp, min/max, casts, reductions).
- Flags.SRC0_IMM / SRC1_IMM apply to every SIMD op that reads src0 / src1 (not only BINARY/CMP).
- SIMD_CAST DEFAULT: float->int truncates and saturates (NaN -> 0); int->int wraps; RTZ is
  supported for F32 -> F16/BF16; BITCAST needs equal item sizes.
- SIMD_IOTA: dst = imm0 + index along dim `subop` (0..3, outermost first).
- DMA_COPY does not convert (dtype_in0 must have dtype_out's item size). When src2 != 0 it is an
  I1 mask over the index space (strides src2_stride) ANDed with the valid box: masked-off
  elements are neither read nor (for non-local destinations) written, and only masked-in
  addresses need to be mapped; local-store destinations get imm0 there.
- DMA_GATHER/SCATTER/ATOMIC: src1 holds U64 device addresses (any memory, unaligned allowed),
  src2 an optional I1 mask. Scatter with repeated addresses: the last in index order wins.
  Atomics with repeated addresses apply in index order, each seeing the previous result; CAS
  compares with imm0 (int or float per Flags.IMM_IS_INT); dst (if non-zero) gets the old values
  (0 for masked-off elements).
- DMA_GATHER with subop GatherForm.ROWS (a row gather): src1 holds one U64 address per row, read
  at index (i0, i1, i2, 0) (src1_stride[3] is ignored), and element (i0, i1, i2, j) is read at
  that address + j * itemsize: each row is a contiguous run of shape[3] elements (unaligned
  allowed). The valid box applies to every dim (indices >= valid are not read: imm0), ANDed with
  the optional I1 mask src2 (a per-row mask has src2_stride[3] = 0). Only masked-in elements'
  addresses must be mapped. GatherForm.ELEMENTS (0) is the per-element gather above.
- DPE_MATMUL follows the generic rule on the index space (M, N, K, 1): src0 uses stride words
  [0] (m) and [2] (k), src1 words [2] (k) and [1] (n), dst words [0] (m) and [1] (n); the other
  words are ignored. Inputs F32/F16/BF16/F64/F8 (fp32 products and accumulator) or I8/U8/I16/I32
  (exact, wrapped to I32/I64); dst F32/F16/BF16/F64/I32/I64.
- RED_REDUCE writes a dst view whose `axis` dim is 1 (whatever dst_stride[axis] says); SUM/PROD
  of small floats accumulate in fp32, of integers in their own width; ARGMAX/ARGMIN give the
  first index (NaN ignored unless PROPAGATE_NAN). MLU_COPY does not convert.
- CommandEvent local-store AddrRanges are absolute device addresses in [LOCAL_BASE,
  LOCAL_BASE + local_store_bytes), also when the PE reaches its own store through its window.
- Registers are 64-bit; 64-bit stores (`sd`) and 32-bit stores (`sw`, e.g. a descriptor address
  below 4 GiB) to DOORBELL/FENCE/EXIT/PRINT both work, as do 32-bit reads of either half.
- Programs of a launch run in grid order (x fastest); program i runs on slot i mod (PEs x cores)
  with PE = slot mod num_pes and core = slot // num_pes (cores = 2 only with dual_core).
- RED_ACCUMULATE (reductions across PEs, over the reduction network): dst[i] = subop(dst[i],
  src0[i]) element-wise over the index space, subop a ReduceOp: SUM, MAX, MIN, PROD, and AND/OR/XOR
  for integer types (ARGMAX/ARGMIN are illegal). src0 must be in this PE's local store (LOCAL_BASE,
  or this PE's own window); dst may be anywhere: this or another PE's local store (its PE window),
  SRAM or DRAM. dtype_out is dst's type; dtype_in0 (NONE: same) must equal it, except that any
  float type may accumulate into any float dst; I1 is not accepted (use U8). The combine is done
  in the compute type (floats up to 32 bits in fp32, rounded once to dtype_out; integers in their
  own width with wrap-around; Flags.UNSIGNED, Flags.PROPAGATE_NAN as for RED_REDUCE). dst elements
  that alias (stride 0, overlapping strides) receive every src0 element mapped to them, in index
  order. Each command is atomic: programs run one after another (docs/DECISIONS.md D1), so the
  result of many PEs accumulating into one tensor does not depend on timing; it is the same in any
  order for integer SUM/PROD and all MAX/MIN/AND/OR/XOR, and for float SUM/PROD it is the program
  order (grid order within a PE, PE by PE: see mtia_sim/simulator.py), exactly reproducible but
  not bit-equal to another summation order. The command processor tracks src0 (read) and a
  local-store dst (read and written); ordering against other PEs' commands on the same dst is not
  tracked (D1). Cost: the RED unit's setup + elements / reduction rate, then the transfer: for a
  PE's local store, NoC hops x hop latency + bytes through the destination PE's reduction-network
  port (noc link bandwidth, shared by every accumulate into that PE) and its local store (read +
  write); for SRAM/DRAM, that level's latency + read + write bytes at its shared bandwidth.

Changes to this module (functional-simulator owner):
- Enums hash like their int value (`_IntEnum`/`_IntFlag` bases): `{DType.F32: x}[12]` now works
  and hashing is fast. Values and names are unchanged.
- `CommandDescriptor.from_bytes` decodes through lookup tables (same results, ~3x faster).
- The operand rules above and the comments of DPE_MATMUL / AtomicOp.CAS were made precise.
- Op.RED_ACCUMULATE = 0x402 added (reduction-engine owner, 2026-12): reductions across PEs; no
  existing name or value changed.
- GatherForm added (2026-12, issue 26): DMA_GATHER's subop selects the per-element gather (0, as
  before) or the row gather (ROWS = 1: one address per row of contiguous elements).
- The codes (Unit, UnitMask, DType, ITEMSIZE, Op, Flags, SimdOp, TRANSCENDENTAL, CmpOp, CastMode,
  ReduceOp, ScanOp, GatherForm, AtomicOp) moved to `mtia_sim.isa_codes` and are re-exported here
  (no name or value changed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mtia_sim.isa_codes import (  # noqa: F401 - the codes are re-exported (callers use isa.X)
    ITEMSIZE,
    TRANSCENDENTAL,
    AtomicOp,
    CastMode,
    CmpOp,
    DType,
    Flags,
    GatherForm,
    Op,
    ReduceOp,
    ScanOp,
    SimdOp,
    Unit,
    UnitMask,
    _IntEnum,
)

# ---------------------------------------------------------------------------------------------
# Memory map
# ---------------------------------------------------------------------------------------------
EXIT_ADDR = 0x0000_F000
CODE_BASE = 0x0001_0000
CODE_SIZE = 0x0040_0000  # 4 MiB
STACK_BASE = 0x0080_0000
STACK_SIZE = 0x0010_0000  # 1 MiB
MMIO_BASE = 0x0400_0000
MMIO_SIZE = 0x1000
LOCAL_BASE = 0x1000_0000
PE_WINDOW_BASE = 0x2000_0000
PE_WINDOW_STRIDE = 0x0010_0000  # 1 MiB per PE window (local stores are at most 1 MiB)
SRAM_BASE = 0x8000_0000
DRAM_BASE = 0x1_0000_0000

ALIGNMENT = 32
"""Tensor operands in DRAM/SRAM/local store should start on 32-byte boundaries for full-rate DMA;
misaligned DMA is legal but costs an extra transfer beat (see the machine description)."""

DESC_ALIGNMENT = 8


class Reg(_IntEnum):
    """Memory-mapped command processor registers, as offsets from MMIO_BASE (64-bit each)."""

    DOORBELL = 0x00  # write: address of a CommandDescriptor -> issue it
    FENCE = 0x08  # write: UnitMask bits -> the core waits until those units are idle
    PROGRAM_ID_X = 0x10  # read
    PROGRAM_ID_Y = 0x18
    PROGRAM_ID_Z = 0x20
    NUM_PROGRAMS_X = 0x28
    NUM_PROGRAMS_Y = 0x30
    NUM_PROGRAMS_Z = 0x38
    PE_ID = 0x40  # read: index of this PE (row-major over the grid)
    CORE_ID = 0x48  # read: 0 or 1
    ARGS_PTR = 0x50  # read: address of the argument block
    EXIT = 0x58  # write: end the program now with this status (non-zero = device assert failed)
    PRINT = 0x60  # write: a 64-bit value to the debug log (tl.device_print)


# ---------------------------------------------------------------------------------------------
# Command descriptor: DESC_WORDS little-endian 64-bit words
# ---------------------------------------------------------------------------------------------
class Field(_IntEnum):
    """Word index of each descriptor field (byte offset = 8 * index)."""

    OP = 0  # Op
    SUBOP = 1  # SimdOp / CmpOp / ReduceOp / ScanOp / AtomicOp / CastMode / IOTA axis
    FLAGS = 2  # Flags
    DTYPES = 3  # dtype_out | dtype_in0 << 8 | dtype_in1 << 16 | dtype_in2 << 24
    AXIS = 4  # RED_REDUCE / RED_SCAN axis (0..3)
    DST = 5
    SRC0 = 6
    SRC1 = 7
    SRC2 = 8
    SHAPE = 9  # 4 words: 9..12
    VALID = 13  # 4 words: 13..16 (DMA bounds; 0 means "same as shape")
    DST_STRIDE = 17  # 4 words: 17..20
    SRC0_STRIDE = 21  # 4 words: 21..24
    SRC1_STRIDE = 25  # 4 words: 25..28
    SRC2_STRIDE = 29  # 4 words: 29..32
    IMM0 = 33  # 64-bit immediate (float64 bits, or int64 with Flags.IMM_IS_INT)
    IMM1 = 34
    TAG = 35  # free for the compiler: a source-location id shown in traces and error messages


DESC_WORDS = 36
DESC_BYTES = DESC_WORDS * 8
MAX_DIMS = 4


def pack_dtypes(out: DType, in0: DType = DType.NONE, in1: DType = DType.NONE, in2: DType = DType.NONE) -> int:
    return int(out) | int(in0) << 8 | int(in1) << 16 | int(in2) << 24


def unpack_dtypes(word: int) -> tuple[DType, DType, DType, DType]:
    return (DType(word & 0xFF), DType(word >> 8 & 0xFF), DType(word >> 16 & 0xFF), DType(word >> 24 & 0xFF))


def _dims(values: tuple[int, ...] | list[int], fill: int) -> list[int]:
    vals = list(values)
    if len(vals) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got {len(vals)}")
    return [fill] * (MAX_DIMS - len(vals)) + vals  # right-align: innermost dim is last


@dataclass
class CommandDescriptor:
    """A decoded command. `shape` etc. are right-aligned to MAX_DIMS (innermost dimension last)."""

    op: Op
    subop: int = 0
    flags: Flags = Flags.NONE
    dtype_out: DType = DType.NONE
    dtype_in0: DType = DType.NONE
    dtype_in1: DType = DType.NONE
    dtype_in2: DType = DType.NONE
    axis: int = 0
    dst: int = 0
    src0: int = 0
    src1: int = 0
    src2: int = 0
    shape: list[int] = field(default_factory=lambda: [1, 1, 1, 1])
    valid: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    dst_stride: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    src0_stride: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    src1_stride: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    src2_stride: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    imm0: int = 0  # raw 64 bits
    imm1: int = 0
    tag: int = 0

    def to_words(self) -> list[int]:
        w = [0] * DESC_WORDS
        w[Field.OP] = int(self.op)
        w[Field.SUBOP] = int(self.subop)
        w[Field.FLAGS] = int(self.flags)
        w[Field.DTYPES] = pack_dtypes(self.dtype_out, self.dtype_in0, self.dtype_in1, self.dtype_in2)
        w[Field.AXIS] = self.axis
        w[Field.DST], w[Field.SRC0], w[Field.SRC1], w[Field.SRC2] = self.dst, self.src0, self.src1, self.src2
        for base, vals in (
            (Field.SHAPE, self.shape),
            (Field.VALID, self.valid),
            (Field.DST_STRIDE, self.dst_stride),
            (Field.SRC0_STRIDE, self.src0_stride),
            (Field.SRC1_STRIDE, self.src1_stride),
            (Field.SRC2_STRIDE, self.src2_stride),
        ):
            for i, v in enumerate(vals):
                w[base + i] = v & 0xFFFF_FFFF_FFFF_FFFF
        w[Field.IMM0], w[Field.IMM1], w[Field.TAG] = self.imm0, self.imm1, self.tag
        return [x & 0xFFFF_FFFF_FFFF_FFFF for x in w]

    def to_bytes(self) -> bytes:
        return struct.pack(f"<{DESC_WORDS}Q", *self.to_words())

    @classmethod
    def from_bytes(cls, raw: bytes) -> CommandDescriptor:
        """Decode; raises ValueError naming the bad field for an unknown opcode or dtype."""
        w = _DESC_STRUCT.unpack_from(raw)
        op = _OP_BY_CODE.get(w[Field.OP] & 0xFFFF_FFFF)
        if op is None:
            raise ValueError(f"unknown command opcode {w[Field.OP]:#x}")
        dword = w[Field.DTYPES] & 0xFFFF_FFFF
        # None (an unknown code) is rejected just below
        d: tuple[DType, ...] = tuple(_DTYPE_BY_CODE.get(dword >> sh & 0xFF) for sh in (0, 8, 16, 24))  # type: ignore[misc]
        if None in d:
            raise ValueError(f"unknown dtype code in dtypes word {w[Field.DTYPES]:#x}")
        fl = w[Field.FLAGS] & 0xFF
        flags = _FLAGS_CACHE.get(fl)
        if flags is None:
            flags = _FLAGS_CACHE[fl] = Flags(fl)
        m = 0xFFFF_FFFF_FFFF_FFFF
        return cls(
            op,
            w[Field.SUBOP],
            flags,
            d[0],
            d[1],
            d[2],
            d[3],
            w[Field.AXIS],
            w[Field.DST] & m,
            w[Field.SRC0] & m,
            w[Field.SRC1] & m,
            w[Field.SRC2] & m,
            list(w[9:13]),
            list(w[13:17]),
            list(w[17:21]),
            list(w[21:25]),
            list(w[25:29]),
            list(w[29:33]),
            w[Field.IMM0] & m,
            w[Field.IMM1] & m,
            w[Field.TAG],
        )

    @staticmethod
    def dims(values: tuple[int, ...] | list[int], fill: int = 1) -> list[int]:
        """Right-align a shape (fill=1) or strides (fill=0) to MAX_DIMS."""
        return _dims(values, fill)


_DESC_STRUCT = struct.Struct(f"<{DESC_WORDS}q")
_OP_BY_CODE: dict[int, Op] = {int(o): o for o in Op}
_DTYPE_BY_CODE: dict[int, DType] = {int(d): d for d in DType}
_FLAGS_CACHE: dict[int, Flags] = {}
