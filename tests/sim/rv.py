"""Build small RISC-V test kernels as LLVM IR text that issue MTIA commands, and compile them.

Kernels follow the isa ABI: `void kernel(ptr args, i32 pid_x, i32 pid_y, i32 pid_z, i32 nx, i32 ny, i32 nz)`.
Descriptors are built on the stack with volatile stores and issued with a volatile store of their
address to the DOORBELL register.
"""

from __future__ import annotations

from mtia_sim import isa
from mtia_sim.isa import CommandDescriptor, Field
from mtia_sim.rvcompile import compile_ir

FIELD_NAMES = {"dst": Field.DST, "src0": Field.SRC0, "src1": Field.SRC1, "src2": Field.SRC2,
               "imm0": Field.IMM0, "imm1": Field.IMM1}


class KernelIR:
    """A tiny IR builder: straight-line code plus whatever raw IR lines a test adds."""

    def __init__(self, name: str = "kernel") -> None:
        self.name = name
        self.allocas: list[str] = []
        self.body: list[str] = []
        self.extra: list[str] = []  # module-level IR (other functions, globals)
        self._n = 0

    def tmp(self, prefix: str = "t") -> str:
        self._n += 1
        return f"%{prefix}{self._n}"

    def emit(self, *lines: str) -> None:
        self.body.extend(lines)

    def arg(self, i: int) -> str:
        p, v = self.tmp("ap"), self.tmp("a")
        self.emit(f"{p} = getelementptr i64, ptr %args, i64 {i}", f"{v} = load i64, ptr {p}")
        return v

    def pid(self, axis: int = 0) -> str:
        v = self.tmp("pid")
        self.emit(f"{v} = sext i32 %pid_{'xyz'[axis]} to i64")
        return v

    def binop(self, op: str, a: str | int, b: str | int) -> str:
        v = self.tmp()
        self.emit(f"{v} = {op} i64 {a}, {b}")
        return v

    def command(self, desc: CommandDescriptor, **dynamic: str | int) -> None:
        """Issue `desc`; `dynamic` overrides descriptor words with SSA values, by field name
        (dst, src0, src1, src2, imm0, imm1) or by word index as 'w<N>'."""
        slot = self.tmp("desc")
        self.allocas.append(f"{slot} = alloca [{isa.DESC_WORDS} x i64], align 8")
        words: list[str | int] = list(desc.to_words())
        for key, val in dynamic.items():
            idx = FIELD_NAMES[key] if key in FIELD_NAMES else int(key[1:])
            words[idx] = val
        for i, w in enumerate(words):
            p = self.tmp("w")
            wv = w if isinstance(w, str) else (w - (1 << 64) if w >> 63 else w)
            self.emit(f"{p} = getelementptr i64, ptr {slot}, i64 {i}", f"store volatile i64 {wv}, ptr {p}")
        self.doorbell_ptr(slot)

    def doorbell_ptr(self, ptr: str) -> None:
        a = self.tmp()
        self.emit(f"{a} = ptrtoint ptr {ptr} to i64")
        self.reg_write(isa.Reg.DOORBELL, a)

    def reg_write(self, reg: isa.Reg, value: str | int) -> None:
        self.emit(f"store volatile i64 {value}, ptr inttoptr (i64 {isa.MMIO_BASE + reg} to ptr)")

    def reg_read(self, reg: isa.Reg) -> str:
        v = self.tmp("r")
        self.emit(f"{v} = load volatile i64, ptr inttoptr (i64 {isa.MMIO_BASE + reg} to ptr)")
        return v

    def fence(self, mask: int = int(isa.UnitMask.ALL)) -> None:
        self.reg_write(isa.Reg.FENCE, mask)

    def render(self) -> str:
        sig = (f"define void @{self.name}(ptr %args, i32 %pid_x, i32 %pid_y, i32 %pid_z, "
               "i32 %nx, i32 %ny, i32 %nz)")
        return "\n".join([*self.extra, sig + " {", "entry:", *("  " + a for a in self.allocas),
                          *("  " + b for b in self.body), "  ret void", "}", ""])

    def compile(self, opt: int = 2) -> bytes:
        return compile_ir(self.render(), opt=opt)


def contiguous(shape: list[int] | tuple[int, ...]) -> list[int]:
    """Row-major element strides of a right-aligned 4-D shape."""
    dims = CommandDescriptor.dims(list(shape))
    strides = [1] * 4
    for d in range(2, -1, -1):
        strides[d] = strides[d + 1] * dims[d + 1]
    return strides
