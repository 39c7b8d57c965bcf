"""The RISC-V target of the PE control core: riscv64, rv64imafdc, LP64D, through llvmlite."""

from __future__ import annotations

import functools
import threading
from typing import Any

TRIPLE = "riscv64-unknown-elf"
CPU = "generic-rv64"
FEATURES = "+m,+a,+f,+d,+c,-relax"
DATALAYOUT = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"

_lock = threading.Lock()


@functools.cache
def target_machine(opt_level: int = 2) -> Any:
    """llvmlite TargetMachine for the control core (static relocation, medium code model)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # The machine scheduler is quadratic over the long runs of volatile descriptor stores (90% of
    # codegen time) and gains nothing on the in-order control core: same instructions without it.
    llvm.set_option("kegen", "--enable-misched=false")
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(
        cpu=CPU, features=FEATURES, opt=opt_level, reloc="static", codemodel="medium", abiname="lp64d"
    )


def _optimized_module(llir: str, opt_level: int) -> Any:
    import llvmlite.binding as llvm

    mod = llvm.parse_assembly(llir)
    mod.verify()
    tm = target_machine(opt_level)
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    return mod


def optimize(llir: str, opt_level: int = 2) -> str:
    """Run LLVM's -O pipeline over LLVM IR text and return the optimized text."""
    with _lock:
        return str(_optimized_module(llir, opt_level))


def _module(llir: str, opt_level: int, optimized: bool) -> Any:
    if not optimized:
        return _optimized_module(llir, opt_level)
    import llvmlite.binding as llvm

    return llvm.parse_assembly(llir)


def emit_assembly(llir: str, opt_level: int = 2, *, optimized: bool = False) -> str:
    """Compile LLVM IR text to RISC-V assembly text (`optimized`: the -O pipeline already ran)."""
    with _lock:
        return str(target_machine(opt_level).emit_assembly(_module(llir, opt_level, optimized)))


def emit_object(llir: str, opt_level: int = 2, *, optimized: bool = False) -> bytes:
    """Compile LLVM IR text to a relocatable RISC-V ELF object (`optimized`: the -O pipeline ran)."""
    with _lock:
        return bytes(target_machine(opt_level).emit_object(_module(llir, opt_level, optimized)))
