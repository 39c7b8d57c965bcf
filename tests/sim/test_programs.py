"""End-to-end: real RISC-V programs (LLVM IR -> object -> linked image) driving the units."""

from __future__ import annotations

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from mtia_sim.events import CommandEvent, CoreEvent, EndEvent, FenceEvent, MemLevel
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Op, SimdOp
from tests.sim.rv import KernelIR

BLOCK = 256


def vector_add_kernel(block: int = BLOCK) -> bytes:
    """out[i] = x[i] + y[i] for i < n; one block of `block` f32 per program."""
    k = KernelIR()
    x, y, out, n = (k.arg(i) for i in range(4))
    off = k.binop("mul", k.pid(0), block)
    byte_off = k.binop("mul", off, 4)
    rem = k.binop("sub", n, off)
    lt = k.tmp()
    valid = k.tmp()
    k.emit(f"{lt} = icmp slt i64 {rem}, {block}", f"{valid} = select i1 {lt}, i64 {rem}, i64 {block}")
    xa, ya, oa = (k.binop("add", p, byte_off) for p in (x, y, out))
    lx, ly, lo = isa.LOCAL_BASE, isa.LOCAL_BASE + 4 * block, isa.LOCAL_BASE + 8 * block
    shape = D.dims([block])
    one = [0, 0, 0, 1]
    for src, dst in ((xa, lx), (ya, ly)):
        k.command(D(Op.DMA_COPY, dtype_out=DType.F32, dst=dst, shape=shape, dst_stride=one, src0_stride=one,
                    tag=1), src0=src, w16=valid)
    k.command(D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=DType.F32, dst=lo, src0=lx, src1=ly, shape=shape,
                dst_stride=one, src0_stride=one, src1_stride=one, tag=2))
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=lo, shape=shape, dst_stride=one, src0_stride=one,
                tag=3), dst=oa, w16=valid)
    k.fence()
    return k.compile()


@pytest.fixture(scope="module")
def vadd(sim: Simulator):
    return sim.load_image(vector_add_kernel(), entry="kernel")


@pytest.mark.parametrize("n", [BLOCK, 1000, 64 * BLOCK + 17])
def test_vector_add(sim: Simulator, vadd, n: int) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    xa, ya = sim.to_device(x), sim.to_device(y)
    sentinel = np.full(n + 64, -7.0, np.float32)
    oa = sim.to_device(sentinel)
    grid = (-(-n // BLOCK), 1, 1)
    res = sim.launch(vadd, grid, [xa, ya, oa, n])
    got = sim.from_device(oa, (n + 64,), np.float32)
    np.testing.assert_array_equal(got[:n], x + y)
    assert np.all(got[n:] == -7.0), "masked store wrote past n"
    assert res.programs == grid[0]
    assert res.commands == 4 * grid[0]
    assert res.instructions > 0
    pes = {t.pe for t in res.traces}
    assert pes == set(range(min(grid[0], sim.num_pes)))
    for addr in (xa, ya, oa):
        sim.free(addr)


def test_vector_add_events(sim: Simulator, vadd) -> None:
    n = 300
    xa, ya, oa = (sim.to_device(np.ones(n, np.float32)) for _ in range(3))
    res = sim.launch(vadd, (2, 1, 1), [xa, ya, oa, n])
    t = res.traces[1]
    assert t.program_id == (1, 0, 0) and t.pe == 1 and t.core == 0
    kinds = [type(e) for e in t.events]
    assert kinds[-1] is EndEvent and FenceEvent in kinds and CoreEvent in kinds
    cmds = [e for e in t.events if isinstance(e, CommandEvent)]
    assert [c.op for c in cmds] == [Op.DMA_COPY, Op.DMA_COPY, Op.SIMD_BINARY, Op.DMA_COPY]
    load = cmds[0]
    assert load.bytes_read == {MemLevel.DRAM: 4 * (n - BLOCK)}
    assert load.bytes_written == {MemLevel.LOCAL: 4 * BLOCK}
    assert load.writes[0].start == isa.LOCAL_BASE and load.writes[0].end == isa.LOCAL_BASE + 4 * BLOCK
    assert cmds[2].reads and cmds[2].writes and cmds[2].flops == BLOCK and cmds[2].tag == 2
    assert cmds[3].bytes_written == {MemLevel.DRAM: 4 * (n - BLOCK)}
    assert all(c.pc >= isa.CODE_BASE for c in cmds)
    assert res.cycles > 0 and res.seconds > 0


def fill_kernel_dram_descriptor() -> bytes:
    """Builds a SIMD_FILL descriptor in DRAM (a 64-bit address) and rings the doorbell with `sd`;
    then rings the same command again from the stack with a 32-bit `sw` of its address."""
    k = KernelIR()
    desc_addr, value_bits = k.arg(0), k.arg(1)
    words = D(Op.SIMD_FILL, dtype_out=DType.F32, dst=isa.LOCAL_BASE, shape=D.dims([64]), dst_stride=[0, 0, 0, 1],
              tag=9).to_words()
    base = k.tmp()
    k.emit(f"{base} = inttoptr i64 {desc_addr} to ptr")
    for i, w in enumerate(words):
        p = k.tmp()
        val = value_bits if i == isa.Field.IMM0 else w
        k.emit(f"{p} = getelementptr i64, ptr {base}, i64 {i}", f"store volatile i64 {val}, ptr {p}")
    k.reg_write(isa.Reg.DOORBELL, desc_addr)
    k.fence()
    # copy the filled block to DRAM right after the descriptor, via a stack descriptor rung with sw
    dst = k.binop("add", desc_addr, isa.DESC_BYTES)
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=isa.LOCAL_BASE, shape=D.dims([64]), dst_stride=[0, 0, 0, 1],
                src0_stride=[0, 0, 0, 1]), dst=dst)
    # re-issue the last stack descriptor with a 32-bit store of its address
    slot = k.allocas[-1].split(" = ")[0]
    a, t = k.tmp(), k.tmp()
    k.emit(f"{a} = ptrtoint ptr {slot} to i64", f"{t} = trunc i64 {a} to i32",
           f"store volatile i32 {t}, ptr inttoptr (i64 {isa.MMIO_BASE + isa.Reg.DOORBELL} to ptr)")
    return k.compile()


@pytest.mark.parametrize("python_hooks", [False, True])
def test_doorbell_widths_and_dram_descriptor(python_hooks: bool) -> None:
    """Both MMIO write paths (native joiner, Python fallback) see sd and sw stores whole."""
    from mtia_sim.core import Core
    from mtia_sim.units.dtypes import encode_immediate

    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    if python_hooks:
        sim.core = Core(sim.memory, max_instructions=10**6, max_commands=100, python_block_hook=True)
    assert (sim.core.native_mmio is None) == python_hooks
    buf = sim.alloc(isa.DESC_BYTES + 256)
    assert buf > 0xFFFF_FFFF
    image = sim.load_image(fill_kernel_dram_descriptor(), entry="kernel")
    res = sim.launch(image, (1,), [buf, encode_immediate(2.5)])
    cmds = [e for e in res.traces[0].events if isinstance(e, CommandEvent)]
    assert [c.op for c in cmds] == [Op.SIMD_FILL, Op.DMA_COPY, Op.DMA_COPY] and cmds[0].tag == 9
    np.testing.assert_array_equal(sim.from_device(buf + isa.DESC_BYTES, (64,), np.float32), np.full(64, 2.5))
    sim.free(buf)


def test_dual_core_and_python_block_hook(sim: Simulator, vadd) -> None:
    from mtia_sim.core import Core

    n = 200 * BLOCK
    x = np.arange(n, dtype=np.float32)
    xa, oa = sim.to_device(x), sim.to_device(np.zeros(n, np.float32))
    res = sim.launch(vadd, (200,), [xa, xa, oa, n], dual_core=True)
    np.testing.assert_array_equal(sim.from_device(oa, (n,), np.float32), 2 * x)
    assert {t.core for t in res.traces} == {0, 1} and {t.pe for t in res.traces} == set(range(sim.num_pes))
    # the Python fallback of the block counter counts the same instructions as the native one
    native = [t.instructions for t in res.traces[:3]]
    slow = Core(sim.memory, max_instructions=10**6, max_commands=100, python_block_hook=True)
    assert slow.counter.native is None
    slow.load(vadd)
    from mtia_sim.core import ProgramSpec
    from mtia_sim.simulator import encode_arg

    args = [encode_arg(a) for a in (xa, xa, oa, n)]
    counts = [slow.run_program(ProgramSpec((i, 0, 0), (200, 1, 1), i, 0, args)).instructions for i in range(3)]
    assert counts == native


def test_matmul_and_row_sum_program(sim: Simulator) -> None:
    """A program that loads A (f16) and B (f16), multiplies on the DPE in two K halves with
    ACCUMULATE, reduces the rows on the reduction engine and stores C and the row sums."""
    m, n, kk = 16, 32, 64
    a = np.random.default_rng(3).standard_normal((m, kk)).astype(np.float16)
    b = np.random.default_rng(4).standard_normal((kk, n)).astype(np.float16)
    la, lb, lc, lr = (isa.LOCAL_BASE + off for off in (0, 0x1000, 0x3000, 0x6000))
    k = KernelIR()
    pa, pb, pc_, pr = (k.arg(i) for i in range(4))
    k.command(D(Op.DMA_COPY, dtype_out=DType.F16, dst=la, shape=D.dims([m, kk]), dst_stride=[0, 0, kk, 1],
                src0_stride=[0, 0, kk, 1]), src0=pa)
    k.command(D(Op.DMA_COPY, dtype_out=DType.F16, dst=lb, shape=D.dims([kk, n]), dst_stride=[0, 0, n, 1],
                src0_stride=[0, 0, n, 1]), src0=pb)
    half = kk // 2
    for step in range(2):
        k.command(D(Op.DPE_MATMUL, flags=isa.Flags.ACCUMULATE if step else isa.Flags.NONE, dtype_out=DType.F32,
                    dtype_in0=DType.F16, dtype_in1=DType.F16, src0=la + 2 * half * step,
                    src1=lb + 2 * half * n * step, dst=lc, shape=[m, n, half, 1], src0_stride=[kk, 0, 1, 0],
                    src1_stride=[0, 1, n, 0], dst_stride=[n, 1, 0, 0], tag=10 + step))
    k.command(D(Op.RED_REDUCE, subop=isa.ReduceOp.SUM, axis=3, dtype_out=DType.F32, src0=lc, dst=lr,
                shape=D.dims([m, n]), src0_stride=[0, 0, n, 1], dst_stride=[0, 0, 1, 0]))
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=lc, shape=D.dims([m, n]), dst_stride=[0, 0, n, 1],
                src0_stride=[0, 0, n, 1]), dst=pc_)
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=lr, shape=D.dims([m]), dst_stride=[0, 0, 0, 1],
                src0_stride=[0, 0, 0, 1]), dst=pr)
    k.fence()
    image = sim.load_image(k.compile(), entry="kernel")
    addrs = [sim.to_device(a), sim.to_device(b), sim.alloc(m * n * 4), sim.alloc(m * 4)]
    res = sim.launch(image, (1,), addrs)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(sim.from_device(addrs[2], (m, n), np.float32), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(sim.from_device(addrs[3], (m,), np.float32), want.sum(1), rtol=1e-4, atol=1e-3)
    mm = [e for e in res.traces[0].events if isinstance(e, CommandEvent) and e.op == Op.DPE_MATMUL]
    assert [e.matmul_mnk for e in mm] == [(m, n, half)] * 2 and [e.tag for e in mm] == [10, 11]
    for p in addrs:
        sim.free(p)


def test_cross_pe_dma_through_windows(sim: Simulator) -> None:
    """Launch 1: program p fills its local store with p and pushes it into PE (p+1)'s store through
    the PE window. Launch 2: each program copies its own local store out to DRAM."""
    n_pe = 4
    k = KernelIR()
    pid = k.pid(0)
    nxt = k.binop("urem", k.binop("add", pid, 1), n_pe)
    window = k.binop("add", k.binop("mul", nxt, isa.PE_WINDOW_STRIDE), isa.PE_WINDOW_BASE + 0x400)
    fval = k.tmp()
    k.emit(f"{fval} = sitofp i64 {pid} to double")
    bits = k.tmp()
    k.emit(f"{bits} = bitcast double {fval} to i64")
    k.command(D(Op.SIMD_FILL, dtype_out=DType.F32, dst=isa.LOCAL_BASE, shape=D.dims([64]), dst_stride=[0, 0, 0, 1]),
              imm0=bits)
    k.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=isa.LOCAL_BASE, shape=D.dims([64]), dst_stride=[0, 0, 0, 1],
                src0_stride=[0, 0, 0, 1], tag=4), dst=window)
    push = sim.load_image(k.compile(), entry="kernel")
    res = sim.launch(push, (n_pe,), [])
    ev = [e for e in res.traces[0].events if isinstance(e, CommandEvent) and e.tag == 4][0]
    assert ev.remote_pe == 1 and ev.bytes_written == {MemLevel.REMOTE_LOCAL: 256}
    k2 = KernelIR()
    out = k2.arg(0)
    dst = k2.binop("add", out, k2.binop("mul", k2.pid(0), 256))
    k2.command(D(Op.DMA_COPY, dtype_out=DType.F32, src0=isa.LOCAL_BASE + 0x400, shape=D.dims([64]),
                 dst_stride=[0, 0, 0, 1], src0_stride=[0, 0, 0, 1]), dst=dst)
    pull = sim.load_image(k2.compile(), entry="kernel")
    buf = sim.alloc(256 * n_pe)
    sim.launch(pull, (n_pe,), [buf])
    got = sim.from_device(buf, (n_pe, 64), np.float32)
    for pe in range(n_pe):
        assert np.all(got[pe] == (pe - 1) % n_pe)
    sim.free(buf)
