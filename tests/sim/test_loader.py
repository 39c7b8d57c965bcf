"""Linking llvmlite objects: relocations, sections, runtime routines; program ids and PE assignment."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mtia_sim import LinkError, Simulator, isa
from mtia_sim.isa import Reg
from mtia_sim.rvcompile import compile_ir
from tests.sim.rv import KernelIR


def prints(res) -> list[int]:
    return [v for _, v in res.debug_log]


def test_calls_constant_pools_globals_and_tables(sim: Simulator) -> None:
    k = KernelIR()
    k.extra += [
        "@counter = global i64 5",
        "@zeros = global [64 x i64] zeroinitializer",
        "@lut = constant [8 x i32] [i32 11, i32 22, i32 33, i32 44, i32 55, i32 66, i32 77, i32 88]",
        "@table = global [2 x ptr] [ptr @twice, ptr @thrice]",
        "define internal i64 @twice(i64 %x) noinline { %r = mul i64 %x, 2\n ret i64 %r }",
        "define internal i64 @thrice(i64 %x) noinline { %r = mul i64 %x, 3\n ret i64 %r }",
        "define i64 @helper(i64 %x) noinline { %r = add i64 %x, 1000\n ret i64 %r }",
        "define double @scale(double %x) noinline { %r = fmul double %x, 3.14159\n"
        " %s = fadd double %r, 2.5e-3\n ret double %s }",
    ]
    pid = k.pid(0)
    k.emit(
        f"%h = call i64 @helper(i64 {pid})",
        "%c0 = load volatile i64, ptr @counter", "%c1 = add i64 %c0, %h", "store volatile i64 %c1, ptr @counter",
        f"%zp = getelementptr [64 x i64], ptr @zeros, i64 0, i64 {pid}", "%z = load volatile i64, ptr %zp",
        f"%lp = getelementptr [8 x i32], ptr @lut, i64 0, i64 {pid}", "%l = load volatile i32, ptr %lp",
        "%l64 = sext i32 %l to i64",
        f"%ti = and i64 {pid}, 1", "%tp = getelementptr [2 x ptr], ptr @table, i64 0, i64 %ti",
        "%fn = load volatile ptr, ptr %tp", "%tv = call i64 %fn(i64 7)",
        f"%fd = sitofp i64 {pid} to double", "%fs = call double @scale(double %fd)",
        "%fb = bitcast double %fs to i64",
    )
    for v in ("%c1", "%z", "%l64", "%tv", "%fb"):
        k.reg_write(Reg.PRINT, v)
    obj = k.compile(opt=1)
    image = sim.load_image(obj, entry="kernel")
    assert {"kernel", "helper", "scale"} <= set(image.symbols) and image.text_size > 0
    res = sim.launch(image, (3, 1, 1), [])
    out = np.array(prints(res)).reshape(3, 5)
    c = 5
    for p in range(3):
        c += 1000 + p  # the global persists across programs of a launch
        assert out[p, 0] == c and out[p, 1] == 0 and out[p, 2] == 11 * (p + 1)
        assert out[p, 3] == (14 if p % 2 == 0 else 21)
        assert struct.unpack("<d", struct.pack("<Q", int(out[p, 4])))[0] == p * 3.14159 + 2.5e-3


def test_memcpy_memset_from_runtime(sim: Simulator) -> None:
    k = KernelIR()
    k.extra += ["declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
                "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
                "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)"]
    src, dst, n = k.arg(0), k.arg(1), k.arg(2)
    k.emit(f"%s = inttoptr i64 {src} to ptr", f"%d = inttoptr i64 {dst} to ptr",
           f"call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 {n}, i1 false)",
           f"%d2 = getelementptr i8, ptr %d, i64 {n}",
           "call void @llvm.memset.p0.i64(ptr %d2, i8 171, i64 16, i1 false)",
           "%d3 = getelementptr i8, ptr %d, i64 2",
           "call void @llvm.memmove.p0.p0.i64(ptr %d3, ptr %d, i64 8, i1 false)")
    image = sim.load_image(k.compile(), entry="kernel")
    assert {"memcpy", "memset", "memmove"} <= set(image.symbols)
    data = np.arange(100, dtype=np.uint8)
    a, b = sim.to_device(data), sim.to_device(np.zeros(128, np.uint8))
    sim.launch(image, (1,), [a, b, 100])
    got = sim.from_device(b, (128,), np.uint8)
    want = np.zeros(128, np.uint8)
    want[:100] = data
    want[100:116] = 171
    want[2:10] = data[:8].copy()
    np.testing.assert_array_equal(got, want)


def test_relaxable_object_links(sim: Simulator) -> None:
    """Objects compiled with +relax carry RELAX/ALIGN relocations; the unrelaxed code must still run."""
    ir = KernelIR()
    ir.extra += ["@g = global i64 41", "define i64 @f(i64 %x) noinline { %r = add i64 %x, 1\n ret i64 %r }"]
    ir.emit("%v = load volatile i64, ptr @g", "%r = call i64 @f(i64 %v)")
    ir.reg_write(Reg.PRINT, "%r")
    obj = compile_ir(ir.render(), features="+m,+a,+f,+d,+c,+relax")
    res = sim.launch(sim.load_image(obj, entry="kernel"), (1,), [])
    assert prints(res) == [42]


def test_link_errors(sim: Simulator) -> None:
    ir = KernelIR()
    ir.extra.append("declare i64 @sqrtl_missing(i64)")
    ir.emit("%r = call i64 @sqrtl_missing(i64 3)")
    with pytest.raises(LinkError, match="undefined symbol 'sqrtl_missing'"):
        sim.load_image(ir.compile(), entry="kernel")
    with pytest.raises(LinkError, match="entry symbol 'nope'"):
        sim.load_image(KernelIR().compile(), entry="nope")
    with pytest.raises(LinkError, match="not an ELF"):
        sim.load_image(b"garbage" * 20, entry="kernel")


def test_new_image_replaces_code(sim: Simulator) -> None:
    images = []
    for val in (1, 2):
        k = KernelIR()
        k.reg_write(Reg.PRINT, val)
        images.append(sim.load_image(k.compile(), entry="kernel"))
    assert prints(sim.launch(images[1], (1,), [])) == [2]
    assert prints(sim.launch(images[0], (1,), [])) == [1]  # launching an image reinstalls it


def test_program_ids_and_pe_assignment(sim: Simulator) -> None:
    k = KernelIR()
    for reg in (Reg.PROGRAM_ID_X, Reg.PROGRAM_ID_Y, Reg.PROGRAM_ID_Z, Reg.NUM_PROGRAMS_X, Reg.NUM_PROGRAMS_Y,
                Reg.NUM_PROGRAMS_Z, Reg.PE_ID, Reg.CORE_ID):
        k.reg_write(Reg.PRINT, k.reg_read(reg))
    abi = [k.pid(0), k.pid(1), k.pid(2)]
    for v in abi:
        k.reg_write(Reg.PRINT, v)
    image = sim.load_image(k.compile(), entry="kernel")
    grid = (70, 2, 1)
    for dual in (False, True):
        res = sim.launch(image, grid, [], dual_core=dual)
        assert res.programs == 140
        out = np.array(prints(res)).reshape(140, 11)
        slots = sim.num_pes * (2 if dual else 1)
        for i, row in enumerate(out):
            x, y = i % 70, i // 70
            slot = i % slots
            assert list(row[:6]) == [x, y, 0, 70, 2, 1]
            assert row[6] == slot % sim.num_pes and row[7] == slot // sim.num_pes
            assert list(row[8:]) == [x, y, 0]
            t = res.traces[i]
            assert t.program_id == (x, y, 0) and t.pe == row[6] and t.core == row[7]


def test_float_and_int_args(sim: Simulator) -> None:
    k = KernelIR()
    a, b = k.arg(0), k.arg(1)
    k.emit(f"%f = bitcast i64 {a} to double", "%f2 = fmul double %f, 2.0", "%fi = fptosi double %f2 to i64")
    k.reg_write(Reg.PRINT, "%fi")
    k.reg_write(Reg.PRINT, b)
    image = sim.load_image(k.compile(), entry="kernel")
    res = sim.launch(image, (1,), [1.75, -5], arg_types=["f32", "i32"])
    assert prints(res) == [3, (-5) & 0xFFFF_FFFF_FFFF_FFFF]
    with pytest.raises(TypeError):
        sim.launch(image, (1,), [1.5, 2], arg_types=["i64", "i64"])


def test_memory_api(sim: Simulator) -> None:
    a = sim.alloc(100)
    b = sim.alloc(10, align=4096)
    assert a % 64 == 0 and b % 4096 == 0 and isa.DRAM_BASE <= a
    sim.write(a, b"hello")
    assert sim.read(a, 5) == b"hello"
    sim.free(a)
    sim.free(b)
    with pytest.raises(ValueError):
        sim.free(a)
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    p = sim.to_device(x)
    np.testing.assert_array_equal(sim.from_device(p, (3, 4), np.float64), x)
    with pytest.raises(MemoryError):
        sim.alloc(1 << 40)


def make_executable(blob: bytes, symbols: dict[str, int]) -> bytes:
    """A minimal RISC-V ET_EXEC: one PT_LOAD of `blob` at CODE_BASE plus .symtab/.strtab."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in symbols)
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    syms = [bytes(24)]
    pos = 1
    for name, addr in symbols.items():
        syms.append(struct.pack("<IBBHQQ", pos, 0x12, 0, 1, addr, 0))  # GLOBAL FUNC in section 1
        pos += len(name) + 1
    symtab = b"".join(syms)
    text_off = 0x1000
    sym_off = text_off + len(blob)
    str_off = sym_off + len(symtab)
    shs_off = str_off + len(strtab)
    sh_off = (shs_off + len(shstr) + 7) // 8 * 8
    hdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    hdr += struct.pack("<HHIQQQIHHHHHH", 2, 243, 1, symbols.get("kernel", isa.CODE_BASE), 64, sh_off, 5, 64, 56,
                       1, 64, 5, 4)
    ph = struct.pack("<IIQQQQQQ", 1, 7, text_off, isa.CODE_BASE, isa.CODE_BASE, len(blob), len(blob), 0x1000)

    def sh(name, typ, flags, addr, off, size, link=0, info=0, align=1, entsize=0):
        return struct.pack("<IIQQQQIIQQ", name, typ, flags, addr, off, size, link, info, align, entsize)

    shdrs = (sh(0, 0, 0, 0, 0, 0) + sh(1, 1, 6, isa.CODE_BASE, text_off, len(blob), align=4)
             + sh(7, 2, 0, 0, sym_off, len(symtab), link=3, info=1, align=8, entsize=24)
             + sh(15, 3, 0, 0, str_off, len(strtab)) + sh(23, 3, 0, 0, shs_off, len(shstr)))
    out = bytearray(hdr + ph)
    out += bytes(text_off - len(out)) + blob + symtab + strtab + shstr
    out += bytes(sh_off - len(out)) + shdrs
    return bytes(out)


def test_linked_executable_is_accepted(sim: Simulator) -> None:
    from mtia_sim.loader import link

    k = KernelIR()
    k.extra.append("@g = global i64 40")
    k.emit("%v = load volatile i64, ptr @g", "%w = add i64 %v, 2")
    k.reg_write(Reg.PRINT, "%w")
    linked = link([k.compile()], "kernel")
    exe = make_executable(linked.blob, {"kernel": linked.entry})
    image = sim.load_image(exe, entry="kernel")
    assert image.entry == linked.entry and image.blob == linked.blob
    assert prints(sim.launch(image, (2,), [])) == [42, 42]
    with pytest.raises(LinkError, match="entry symbol 'other'"):
        sim.load_image(exe, entry="other")
