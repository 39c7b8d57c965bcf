"""A linked image → an executable ELF (ET_EXEC) that the simulator's loader takes as is.

The `elf` stage links the kernel's object (and the built-in runtime, when the code calls memcpy or
memset) with `mtia_sim.loader.link` at the code base, then writes the image as one PT_LOAD segment
with a `.text` section covering it and a symbol table of the linked globals.
`mtia_sim.loader.link([exe], entry)` gives back the same blob, entry and symbols.
"""

from __future__ import annotations

import struct
from typing import Any

EM_RISCV = 243
ET_EXEC = 2
PT_LOAD = 1
PF_RWX = 7
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
EF_RISCV_FLOAT_ABI_DOUBLE_RVC = 0x5  # RVC + double-float ABI, as LLVM sets for lp64d with +c
_EHDR, _PHDR, _SHDR, _SYM = 64, 56, 64, 24


def _strtab(names: list[str]) -> tuple[bytes, dict[str, int]]:
    data, offsets = bytearray(b"\0"), {"": 0}
    for n in names:
        if n not in offsets:
            offsets[n] = len(data)
            data += n.encode() + b"\0"
    return bytes(data), offsets


def link_executable(objects: list[bytes], entry: str) -> bytes:
    """Link relocatable RISC-V objects (entry symbol `entry`) into an executable ELF image."""
    from mtia_sim.loader import link

    return executable(link(objects, entry))


def executable(image: Any) -> bytes:
    """The ELF executable of a `mtia_sim.loader.Image` (blob at `image.base`)."""
    blob, base = bytes(image.blob), int(image.base)
    symbols = sorted(image.symbols.items(), key=lambda kv: (kv[1], kv[0]))
    strtab, str_off = _strtab([n for n, _ in symbols])
    shstrtab, sh_off = _strtab([".text", ".symtab", ".strtab", ".shstrtab"])
    symtab = bytearray(_SYM)  # the null symbol
    for name, value in symbols:
        info = (1 << 4) | (2 if value == image.entry else 0)  # STB_GLOBAL, STT_FUNC for the entry
        symtab += struct.pack("<IBBHQQ", str_off[name], info, 0, 1, value, 0)
    text_off = _EHDR + _PHDR
    sym_off = text_off + len(blob)
    sym_off += -sym_off % 8
    str_pos = sym_off + len(symtab)
    shstr_pos = str_pos + len(strtab)
    sh_pos = shstr_pos + len(shstrtab)
    sh_pos += -sh_pos % 8
    header = struct.pack(
        "<4sBBBBB7sHHIQQQIHHHHHH",
        b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
        ET_EXEC, EM_RISCV, 1, image.entry, _EHDR, sh_pos, EF_RISCV_FLOAT_ABI_DOUBLE_RVC,
        _EHDR, _PHDR, 1, _SHDR, 5, 4,
    )
    phdr = struct.pack("<IIQQQQQQ", PT_LOAD, PF_RWX, text_off, base, base, len(blob), len(blob), 0x1000)
    sections = [
        bytes(_SHDR),
        struct.pack("<IIQQQQIIQQ", sh_off[".text"], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR | SHF_WRITE,
                    base, text_off, len(blob), 0, 0, 16, 0),
        struct.pack("<IIQQQQIIQQ", sh_off[".symtab"], SHT_SYMTAB, 0, 0, sym_off, len(symtab), 3, 1, 8, _SYM),
        struct.pack("<IIQQQQIIQQ", sh_off[".strtab"], SHT_STRTAB, 0, 0, str_pos, len(strtab), 0, 0, 1, 0),
        struct.pack(
            "<IIQQQQIIQQ", sh_off[".shstrtab"], SHT_STRTAB, 0, 0, shstr_pos, len(shstrtab), 0, 0, 1, 0
        ),
    ]
    out = bytearray(header + phdr + blob)
    out += bytes(sym_off - len(out)) + symtab + strtab + shstrtab
    out += bytes(sh_pos - len(out)) + b"".join(sections)
    return bytes(out)
