"""Link RISC-V ELF objects (from LLVM via llvmlite) into an image at isa.CODE_BASE.

Accepted input: relocatable objects (ET_REL, one or several) or an already-linked executable
(ET_EXEC whose PT_LOAD segments lie inside the code region). Relocation types handled: 32, 64,
BRANCH, JAL, CALL, CALL_PLT, PCREL_HI20 + PCREL_LO12_I/S, HI20 + LO12_I/S, RVC_BRANCH, RVC_JUMP,
32_PCREL, ADD/SUB 8..64, SET 6..32; RELAX is ignored (no relaxation, the unrelaxed code is valid) and
ALIGN padding stays as the assembler emitted it (code stays correct, targets may be less aligned).
memcpy/memset/memmove are linked from a built-in runtime object when the image needs them.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from mtia_sim import isa
from mtia_sim.errors import LinkError

EM_RISCV = 243

R_32, R_64 = 1, 2
R_BRANCH, R_JAL, R_CALL, R_CALL_PLT = 16, 17, 18, 19
R_PCREL_HI20, R_PCREL_LO12_I, R_PCREL_LO12_S = 23, 24, 25
R_HI20, R_LO12_I, R_LO12_S = 26, 27, 28
R_ADD8, R_ADD16, R_ADD32, R_ADD64 = 33, 34, 35, 36
R_SUB8, R_SUB16, R_SUB32, R_SUB64 = 37, 38, 39, 40
R_ALIGN, R_RVC_BRANCH, R_RVC_JUMP = 43, 44, 45
R_RELAX, R_SUB6, R_SET6, R_SET8, R_SET16, R_SET32, R_32_PCREL = 51, 52, 53, 54, 55, 56, 57

RUNTIME_SYMBOLS = frozenset({"memcpy", "memset", "memmove"})


@dataclass
class Image:
    """A linked program: `blob` is loaded at `base`; `entry` is the kernel's address."""

    entry: int
    entry_name: str
    symbols: dict[str, int]
    blob: bytes
    base: int = isa.CODE_BASE
    section_sizes: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.blob)

    @property
    def text_size(self) -> int:
        return sum(n for k, n in self.section_sizes.items() if k.startswith(".text"))


def _section_rank(name: str, flags: int, stype: str) -> int:
    if flags & SH_FLAGS.SHF_EXECINSTR:
        return 0
    if stype == "SHT_NOBITS":
        return 3
    if flags & SH_FLAGS.SHF_WRITE:
        return 2
    return 1


@dataclass
class _Obj:
    elf: ELFFile
    name: str
    sec_addr: dict[int, int] = field(default_factory=dict)
    common: dict[str, int] = field(default_factory=dict)


def _open(data: bytes, name: str) -> ELFFile:
    try:
        elf = ELFFile(io.BytesIO(data))
    except Exception as exc:  # pyelftools raises several types for garbage
        raise LinkError(f"{name}: not an ELF file ({exc})") from None
    if elf["e_machine"] != "EM_RISCV" or elf.elfclass != 64 or not elf.little_endian:
        raise LinkError(f"{name}: expected a little-endian 64-bit RISC-V ELF, got {elf['e_machine']} "
                        f"class {elf.elfclass}")
    return elf


def _alloc_sections(elf: ELFFile) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for i, sec in enumerate(elf.iter_sections()):
        flags = sec["sh_flags"]
        if not flags & SH_FLAGS.SHF_ALLOC or sec.name.startswith(".eh_frame"):
            continue
        out.append((i, sec))
    return out


def link(objects: list[bytes], entry: str) -> Image:
    """Link relocatable objects (or load one executable) into an Image whose entry is `entry`."""
    if not objects:
        raise LinkError("nothing to link")
    first = _open(objects[0], "object 0")
    if first["e_type"] == "ET_EXEC":
        if len(objects) > 1:
            raise LinkError("an executable must be loaded alone")
        return _load_exec(first, entry)
    objs = [_Obj(_open(d, f"object {i}"), f"object {i}") for i, d in enumerate(objects)]
    for o in objs:
        if o.elf["e_type"] != "ET_REL":
            raise LinkError(f"{o.name}: expected a relocatable object (ET_REL), got {o.elf['e_type']}")
    undefined = _undefined(objs) & RUNTIME_SYMBOLS
    if undefined:
        from mtia_sim.runtime import runtime_object

        objs.append(_Obj(_open(runtime_object(), "runtime"), "built-in runtime"))

    # -- layout ----------------------------------------------------------------------------
    placed: list[tuple[int, _Obj, int, Any]] = []
    for o in objs:
        for idx, sec in _alloc_sections(o.elf):
            placed.append((_section_rank(sec.name, sec["sh_flags"], sec["sh_type"]), o, idx, sec))
    placed.sort(key=lambda t: t[0])
    addr = isa.CODE_BASE
    sizes: dict[str, int] = {}
    for _, o, idx, sec in placed:
        align = max(int(sec["sh_addralign"]), 1)  # type: ignore[index]
        addr = -(-addr // align) * align
        o.sec_addr[idx] = addr
        sizes[sec.name] = sizes.get(sec.name, 0) + int(sec["sh_size"])  # type: ignore[attr-defined,index]
        addr += int(sec["sh_size"])  # type: ignore[index]
    for o in objs:  # COMMON symbols go at the end, like .bss
        for sym in _symbols(o.elf):
            if sym["st_shndx"] == "SHN_COMMON" and sym.name not in o.common:
                align = max(int(sym["st_value"]), 1)
                addr = -(-addr // align) * align
                o.common[sym.name] = addr
                addr += int(sym["st_size"])
    end = addr
    if end - isa.CODE_BASE > isa.CODE_SIZE:
        raise LinkError(f"image of {end - isa.CODE_BASE} bytes exceeds the code region ({isa.CODE_SIZE})")
    blob = bytearray(end - isa.CODE_BASE)
    for _, o, idx, sec in placed:
        if sec["sh_type"] != "SHT_NOBITS":  # type: ignore[index]
            data = sec.data()  # type: ignore[attr-defined]
            off = o.sec_addr[idx] - isa.CODE_BASE
            blob[off:off + len(data)] = data

    # -- symbols ---------------------------------------------------------------------------
    globals_: dict[str, int] = {}
    for o in objs:
        for sym in _symbols(o.elf):
            if sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and sym["st_shndx"] != "SHN_UNDEF":
                val = _symbol_value(o, sym)
                if sym.name in globals_ and sym["st_info"]["bind"] == "STB_WEAK":
                    continue
                globals_[sym.name] = val
    for o in objs:
        _relocate(o, blob, globals_)
    if entry not in globals_:
        local = _local_symbols(objs)
        if entry not in local:
            names = ", ".join(sorted(n for n in globals_ if n not in RUNTIME_SYMBOLS)) or "none"
            raise LinkError(f"entry symbol {entry!r} is not defined (defined: {names})")
        globals_[entry] = local[entry]
    return Image(entry=globals_[entry], entry_name=entry, symbols=globals_, blob=bytes(blob),
                 section_sizes=sizes)


def _symbols(elf: ELFFile) -> list:  # type: ignore[type-arg]
    tab = elf.get_section_by_name(".symtab")
    if not isinstance(tab, SymbolTableSection):
        return []
    return list(tab.iter_symbols())


def _local_symbols(objs: list[_Obj]) -> dict[str, int]:
    out = {}
    for o in objs:
        for sym in _symbols(o.elf):
            if sym.name and sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") \
                    and isinstance(sym["st_shndx"], int):
                out[sym.name] = _symbol_value(o, sym)
    return out


def _undefined(objs: list[_Obj]) -> set[str]:
    defined: set[str] = set()
    used: set[str] = set()
    for o in objs:
        for sym in _symbols(o.elf):
            if not sym.name:
                continue
            (used if sym["st_shndx"] == "SHN_UNDEF" else defined).add(sym.name)
    return used - defined


def _symbol_value(o: _Obj, sym) -> int:  # type: ignore[no-untyped-def]
    shndx = sym["st_shndx"]
    if shndx == "SHN_ABS":
        return int(sym["st_value"])
    if shndx == "SHN_COMMON":
        return o.common[sym.name]
    if not isinstance(shndx, int) or shndx not in o.sec_addr:
        raise LinkError(f"{o.name}: symbol {sym.name!r} is in section {shndx}, which is not loaded")
    return o.sec_addr[shndx] + int(sym["st_value"])


def _resolve(o: _Obj, sym, globals_: dict[str, int]) -> int:  # type: ignore[no-untyped-def]
    if sym["st_shndx"] == "SHN_UNDEF":
        if sym.name in globals_:
            return globals_[sym.name]
        if sym["st_info"]["bind"] == "STB_WEAK":
            return 0
        hint = " (a C library routine: the image may only call memcpy/memset/memmove)" \
            if sym.name not in RUNTIME_SYMBOLS else ""
        raise LinkError(f"undefined symbol {sym.name!r}{hint}")
    return _symbol_value(o, sym)


def _relocate(o: _Obj, blob: bytearray, globals_: dict[str, int]) -> None:
    syms = _symbols(o.elf)
    sec: Any
    for sec in o.elf.iter_sections():
        if sec["sh_type"] not in ("SHT_RELA", "SHT_REL"):
            continue
        target = sec["sh_info"]
        if target not in o.sec_addr:
            continue  # relocations of debug/eh_frame sections
        if sec["sh_type"] == "SHT_REL":
            raise LinkError(f"{o.name}: SHT_REL relocations are not used on RISC-V")
        base = o.sec_addr[target]
        relocs = list(sec.iter_relocations())
        hi20: dict[int, int] = {}  # address of an AUIPC -> its full pc-relative offset
        for rel in relocs:
            if rel["r_info_type"] == R_PCREL_HI20:
                p = base + rel["r_offset"]
                s = _resolve(o, syms[rel["r_info_sym"]], globals_)
                hi20[p] = s + rel["r_addend"] - p
        for rel in relocs:
            _apply(o, blob, base, rel, syms, globals_, hi20)


def _rd32(blob: bytearray, off: int) -> int:
    return int(struct.unpack_from("<I", blob, off)[0])


def _wr32(blob: bytearray, off: int, v: int) -> None:
    struct.pack_into("<I", blob, off, v & 0xFFFF_FFFF)


def _check_range(v: int, bits: int, what: str, p: int) -> None:
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise LinkError(f"{what} relocation at {p:#x}: offset {v} does not fit {bits} signed bits")


def _hi_lo(v: int) -> tuple[int, int]:
    hi = (v + 0x800) >> 12
    return hi, v - (hi << 12)


def _set_u(blob: bytearray, off: int, v: int, p: int) -> None:
    hi, _ = _hi_lo(v)
    _check_range(hi, 20, "HI20", p)
    _wr32(blob, off, (_rd32(blob, off) & 0xFFF) | ((hi & 0xFFFFF) << 12))


def _set_i(blob: bytearray, off: int, lo: int) -> None:
    _wr32(blob, off, (_rd32(blob, off) & 0xFFFFF) | ((lo & 0xFFF) << 20))


def _set_s(blob: bytearray, off: int, lo: int) -> None:
    insn = _rd32(blob, off) & 0x01FFF07F
    _wr32(blob, off, insn | ((lo & 0x1F) << 7) | (((lo >> 5) & 0x7F) << 25))


def _apply(o: _Obj, blob: bytearray, base: int, rel, syms, globals_: dict[str, int],  # type: ignore[no-untyped-def]
           hi20: dict[int, int]) -> None:
    rtype = rel["r_info_type"]
    if rtype in (R_RELAX, R_ALIGN):
        return
    p = base + rel["r_offset"]
    off = p - isa.CODE_BASE
    sym = syms[rel["r_info_sym"]]
    a = rel["r_addend"]
    s = _resolve(o, sym, globals_)
    v = s + a
    if rtype == R_64:
        struct.pack_into("<Q", blob, off, v & 0xFFFF_FFFF_FFFF_FFFF)
    elif rtype == R_32:
        struct.pack_into("<I", blob, off, v & 0xFFFF_FFFF)
    elif rtype == R_32_PCREL:
        struct.pack_into("<I", blob, off, (v - p) & 0xFFFF_FFFF)
    elif rtype in (R_CALL, R_CALL_PLT):
        d = v - p
        hi, lo = _hi_lo(d)
        _check_range(d, 32, "CALL", p)
        _wr32(blob, off, (_rd32(blob, off) & 0xFFF) | ((hi & 0xFFFFF) << 12))
        _set_i(blob, off + 4, lo)
    elif rtype == R_PCREL_HI20:
        _set_u(blob, off, v - p, p)
    elif rtype in (R_PCREL_LO12_I, R_PCREL_LO12_S):
        if s not in hi20:  # the symbol labels the AUIPC carrying the PCREL_HI20
            raise LinkError(f"{o.name}: PCREL_LO12 at {p:#x} has no matching PCREL_HI20 at {s:#x}")
        _, lo = _hi_lo(hi20[s])
        (_set_i if rtype == R_PCREL_LO12_I else _set_s)(blob, off, lo)
    elif rtype == R_HI20:
        _set_u(blob, off, v, p)
    elif rtype == R_LO12_I:
        _set_i(blob, off, _hi_lo(v)[1])
    elif rtype == R_LO12_S:
        _set_s(blob, off, _hi_lo(v)[1])
    elif rtype == R_BRANCH:
        d = v - p
        _check_range(d, 13, "BRANCH", p)
        insn = _rd32(blob, off) & 0x01FFF07F
        insn |= ((d >> 12) & 1) << 31 | ((d >> 5) & 0x3F) << 25 | ((d >> 1) & 0xF) << 8 | ((d >> 11) & 1) << 7
        _wr32(blob, off, insn)
    elif rtype == R_JAL:
        d = v - p
        _check_range(d, 21, "JAL", p)
        insn = _rd32(blob, off) & 0xFFF
        insn |= ((d >> 20) & 1) << 31 | ((d >> 1) & 0x3FF) << 21 | ((d >> 11) & 1) << 20 \
            | ((d >> 12) & 0xFF) << 12
        _wr32(blob, off, insn)
    elif rtype == R_RVC_BRANCH:
        d = v - p
        _check_range(d, 9, "RVC_BRANCH", p)
        insn = struct.unpack_from("<H", blob, off)[0] & 0xE383
        insn |= ((d >> 8) & 1) << 12 | ((d >> 3) & 3) << 10 | ((d >> 6) & 3) << 5 | ((d >> 1) & 3) << 3 \
            | ((d >> 5) & 1) << 2
        struct.pack_into("<H", blob, off, insn)
    elif rtype == R_RVC_JUMP:
        d = v - p
        _check_range(d, 12, "RVC_JUMP", p)
        insn = struct.unpack_from("<H", blob, off)[0] & 0xE003
        insn |= ((d >> 11) & 1) << 12 | ((d >> 4) & 1) << 11 | ((d >> 8) & 3) << 9 | ((d >> 10) & 1) << 8 \
            | ((d >> 6) & 1) << 7 | ((d >> 7) & 1) << 6 | ((d >> 1) & 7) << 3 | ((d >> 5) & 1) << 2
        struct.pack_into("<H", blob, off, insn)
    elif rtype in (R_ADD8, R_ADD16, R_ADD32, R_ADD64, R_SUB8, R_SUB16, R_SUB32, R_SUB64):
        width = {R_ADD8: 1, R_SUB8: 1, R_ADD16: 2, R_SUB16: 2, R_ADD32: 4, R_SUB32: 4}.get(rtype, 8)
        fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}[width]
        cur = struct.unpack_from(fmt, blob, off)[0]
        new = cur + v if rtype in (R_ADD8, R_ADD16, R_ADD32, R_ADD64) else cur - v
        struct.pack_into(fmt, blob, off, new & ((1 << (8 * width)) - 1))
    elif rtype in (R_SET8, R_SET16, R_SET32):
        width = {R_SET8: 1, R_SET16: 2, R_SET32: 4}[rtype]
        struct.pack_into({1: "<B", 2: "<H", 4: "<I"}[width], blob, off, v & ((1 << (8 * width)) - 1))
    elif rtype in (R_SET6, R_SUB6):
        cur = blob[off]
        val = (v if rtype == R_SET6 else (cur & 0x3F) - v) & 0x3F
        blob[off] = (cur & 0xC0) | val
    else:
        raise LinkError(f"{o.name}: unsupported RISC-V relocation type {rtype} at {p:#x} "
                        f"(symbol {sym.name!r}); compile with reloc=static, codemodel=medium")


def _load_exec(elf: ELFFile, entry: str) -> Image:
    segs = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
    if not segs:
        raise LinkError("executable has no PT_LOAD segments")
    lo = min(s["p_vaddr"] for s in segs)
    hi = max(s["p_vaddr"] + s["p_memsz"] for s in segs)
    if lo < isa.CODE_BASE or hi > isa.CODE_BASE + isa.CODE_SIZE:
        raise LinkError(f"executable spans [{lo:#x}, {hi:#x}); it must lie inside the code region "
                        f"[{isa.CODE_BASE:#x}, {isa.CODE_BASE + isa.CODE_SIZE:#x}) (link with -Ttext)")
    blob = bytearray(hi - isa.CODE_BASE)
    for s in segs:
        data = s.data()
        off = s["p_vaddr"] - isa.CODE_BASE
        blob[off:off + len(data)] = data
    symbols = {sym.name: int(sym["st_value"]) for sym in _symbols(elf)
               if sym.name and sym["st_shndx"] != "SHN_UNDEF"}
    if entry not in symbols:
        raise LinkError(f"entry symbol {entry!r} is not in the executable's symbol table")
    return Image(entry=symbols[entry], entry_name=entry, symbols=symbols, blob=bytes(blob))
