"""Compile LLVM IR text to a RISC-V object (simulator tests, benchmarks, built-in runtime routines).

The compiler (`lowering/`) has its own codegen; this helper exists so `mtia_sim` can be tested
with real RISC-V programs on its own. Target settings follow notes/unicorn-llvmlite.md.
"""

from __future__ import annotations

import functools
import threading

TRIPLE = "riscv64-unknown-elf"
CPU = "generic-rv64"
FEATURES = "+m,+a,+f,+d,+c,-relax"
DATALAYOUT = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"

_lock = threading.Lock()


@functools.cache
def _target_machine(features: str, opt: int):  # type: ignore[no-untyped-def]
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=CPU, features=features, opt=opt, reloc="static",
                                        codemodel="medium")


def _parse(ir: str):  # type: ignore[no-untyped-def]
    import llvmlite.binding as llvm

    if "target triple" not in ir:
        ir = f'target triple = "{TRIPLE}"\ntarget datalayout = "{DATALAYOUT}"\n' + ir
    mod = llvm.parse_assembly(ir)
    mod.verify()
    return mod


def compile_ir(ir: str, *, opt: int = 2, features: str = FEATURES) -> bytes:
    """Compile LLVM IR text (riscv64) to a relocatable ELF object."""
    with _lock:
        mod = _parse(ir)
        return bytes(_target_machine(features, opt).emit_object(mod))


def assemble_ir(ir: str, *, opt: int = 2, features: str = FEATURES) -> str:
    """Compile LLVM IR text (riscv64) to assembly text (for debugging tests)."""
    with _lock:
        mod = _parse(ir)
        return str(_target_machine(features, opt).emit_assembly(mod))
