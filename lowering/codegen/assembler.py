"""RISC-V assembly text → relocatable ELF object, with LLVM's `llvm-mc` (llvmlite has no RISC-V asm
parser, so the `elf` stage assembles the `rvasm` stage's text with the LLVM tools, as Triton's NVIDIA
backend runs `ptxas` on its `ptx` stage).

`llvm-mc` is found as `$KEGEN_LLVM_MC`, else `llvm-mc` or `llvm-mc-NN` on PATH (Debian's `llvm`
package). The arch attribute line LLVM prints (``.attribute 5, "rv64i2p1_m2p0_..."``) is dropped:
older assemblers reject newer extension versions, and the target features are passed explicitly.
On every corpus kernel the object's code and the linked image equal those of llvmlite's own
`emit_object` (tools/snapshot_lowering.py).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from lowering.codegen.target import FEATURES, TRIPLE
from lowering.errors import LoweringError

_ARCH_ATTRIBUTE = re.compile(r"^\s*\.attribute\s+(5|arch)\s*,.*$", re.M)


@functools.cache
def llvm_mc() -> str:
    """Path of the `llvm-mc` assembler; a LoweringError saying how to install it when absent."""
    explicit = os.environ.get("KEGEN_LLVM_MC")
    if explicit:
        if not Path(explicit).is_file():
            raise LoweringError(f"KEGEN_LLVM_MC={explicit} is not a file")
        return explicit
    found = shutil.which("llvm-mc")
    if found:
        return found
    for version in range(30, 13, -1):
        found = shutil.which(f"llvm-mc-{version}")
        if found:
            return found
    raise LoweringError(
        "the elf stage assembles RISC-V text with LLVM's llvm-mc, which is not on PATH: install it "
        "(Debian/Ubuntu: apt-get install llvm) or point KEGEN_LLVM_MC at it"
    )


def assemble(asm: str, name: str = "kernel") -> bytes:
    """Assemble RISC-V assembly text (as the rvasm stage prints it) into a relocatable ELF object."""
    text = _ARCH_ATTRIBUTE.sub("", asm)
    with tempfile.TemporaryDirectory(prefix="kegen-as-") as tmp:
        src, obj = Path(tmp) / f"{name}.s", Path(tmp) / f"{name}.o"
        src.write_text(text)
        proc = subprocess.run(
            [llvm_mc(), f"-triple={TRIPLE}", f"-mattr={FEATURES}", "-filetype=obj", str(src), "-o", str(obj)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            errors = proc.stderr.strip().replace(str(src), "<rvasm>")
            raise LoweringError(f"assembling the rvasm of {name} failed:\n{errors}")
        return obj.read_bytes()
