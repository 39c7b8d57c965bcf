"""Replayed commands (the core's per-descriptor plan cache) do exactly what a full execution does."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from mtia_sim.errors import IllegalCommandError
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Flags, Op, SimdOp
from mtia_sim.units import execute, replay
from mtia_sim.units.dtypes import NP_DTYPE, encode_immediate
from tests.sim.rv import KernelIR
from tests.sim.units_helpers import L, strides_of

ONE = [0, 0, 0, 1]
LOCAL_BYTES = 64 * 1024


def _randomise(sim: Simulator, rng: np.random.Generator, dram: int) -> None:
    local = sim.memory.local(0)
    local[:LOCAL_BYTES] = rng.integers(0, 256, LOCAL_BYTES, dtype=np.uint8)
    # keep floats finite-ish but include some NaN/inf/negative patterns through the random bytes
    sim.memory.view(dram, 1 << 16)[:] = rng.integers(0, 256, 1 << 16, dtype=np.uint8)


def _state(sim: Simulator, dram: int) -> bytes:
    return sim.memory.local(0)[:LOCAL_BYTES].tobytes() + sim.memory.view(dram, 1 << 16).tobytes()


def _descriptors(dram: int) -> list[D]:
    out: list[D] = []
    for dt in (DType.F32, DType.F16, DType.BF16, DType.I32, DType.I8, DType.F64):
        shape = D.dims([4, 33])
        st = strides_of([4, 33])
        for op in (SimdOp.ADD, SimdOp.MUL, SimdOp.MAX, SimdOp.DIV, SimdOp.SUB, SimdOp.MIN):
            out.append(D(Op.SIMD_BINARY, subop=op, dtype_out=dt, dst=L + 0x4000, src0=L, src1=L + 0x2000,
                         shape=shape, dst_stride=st, src0_stride=st, src1_stride=[0, 0, 0, 1]))
            imm = encode_immediate(3 if dt in (DType.I32, DType.I8) else 1.5)
            flags = Flags.SRC1_IMM | (Flags.IMM_IS_INT if dt in (DType.I32, DType.I8) else Flags.NONE)
            out.append(D(Op.SIMD_BINARY, subop=op, dtype_out=dt, dst=L + 0x4000, src0=L, imm1=imm, flags=flags,
                         shape=shape, dst_stride=st, src0_stride=st))
        for op in (SimdOp.EXP, SimdOp.NEG, SimdOp.ABS, SimdOp.SQRT, SimdOp.RSQRT):
            out.append(D(Op.SIMD_UNARY, subop=op, dtype_out=dt, dst=L + 0x4000, src0=L, shape=shape,
                         dst_stride=st, src0_stride=[1, 4, 0, 1]))
        out.append(D(Op.SIMD_FILL, dtype_out=dt, dst=L + 0x4000, imm0=encode_immediate(2.5), shape=shape,
                     dst_stride=st))
        # in place, overlapping and broadcast destinations
        out.append(D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=dt, dst=L + 4, src0=L, src1=L + 8, shape=shape,
                     dst_stride=st, src0_stride=st, src1_stride=st))
        out.append(D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=dt, dst=L + 0x4000, src0=L, src1=L + 8,
                     shape=shape, dst_stride=[0, 0, 0, 1], src0_stride=st, src1_stride=st))
        # DMA: DRAM -> local with a valid box (fill), local -> DRAM with a box, reversed strides
        size = NP_DTYPE[dt].itemsize
        out.append(D(Op.DMA_COPY, dtype_out=dt, dst=L + 0x6000, src0=dram, shape=shape, valid=[0, 0, 3, 20],
                     imm0=encode_immediate(7), flags=Flags.IMM_IS_INT, dst_stride=st, src0_stride=[0, 0, 40, 1]))
        out.append(D(Op.DMA_COPY, dtype_out=dt, dst=dram + 0x1000, src0=L, shape=shape, valid=[0, 0, 2, 0],
                     dst_stride=[0, 0, 50, 1], src0_stride=st))
        out.append(D(Op.DMA_COPY, dtype_out=dt, dst=L + 0x6000, src0=dram + 200 * size, shape=D.dims([100]),
                     dst_stride=ONE, src0_stride=[0, 0, 0, -1]))
    for a_dt, o_dt in ((DType.F16, DType.F32), (DType.BF16, DType.BF16), (DType.I8, DType.I32),
                       (DType.F32, DType.F32)):
        for flags in (Flags.NONE, Flags.ACCUMULATE):
            out.append(D(Op.DPE_MATMUL, dtype_out=o_dt, dtype_in0=a_dt, dtype_in1=a_dt, flags=flags,
                         dst=L + 0x8000, src0=L, src1=L + 0x2000, shape=[8, 16, 24, 1],
                         dst_stride=[16, 1, 0, 0], src0_stride=[24, 0, 1, 0], src1_stride=[0, 1, 16, 0]))
    return out


def test_replay_matches_full_execution() -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=4 << 20)
    dram = sim.alloc(1 << 16)
    rng = np.random.default_rng(0)
    replayed = 0
    for desc in _descriptors(dram):
        desc = D.from_bytes(desc.to_bytes())
        with np.errstate(all="ignore"):
            _randomise(sim, rng, dram)
            try:
                first = execute(desc, sim.memory, 0)
            except IllegalCommandError:  # e.g. EXP of an integer: never replayed
                continue
            again = replay(desc, sim.memory, 0)
            if again is None:
                continue
            replayed += 1
            for _ in range(2):  # new data: the replay and a full execution write the same bytes
                seed = int(rng.integers(1 << 30))
                _randomise(sim, np.random.default_rng(seed), dram)
                full = execute(desc, sim.memory, 0)
                want = _state(sim, dram)
                _randomise(sim, np.random.default_rng(seed), dram)
                again()
                assert _state(sim, dram) == want, f"replay of {desc.op.name} {desc.dtype_out.name} differs"
                assert full == first, f"the event of {desc.op.name} changed with the data"
    assert replayed >= 100


def test_masked_and_addressed_commands_are_not_replayed() -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=4 << 20)
    dram = sim.alloc(4096)
    masked = D(Op.DMA_COPY, dtype_out=DType.F32, dst=L, src0=dram, src2=L + 0x1000, shape=D.dims([16]),
               dst_stride=ONE, src0_stride=ONE, src2_stride=ONE)
    gather = D(Op.DMA_GATHER, dtype_out=DType.F32, dst=L, src1=L + 0x1000, shape=D.dims([4]), dst_stride=ONE,
               src1_stride=ONE)
    sim.write(sim.local_address(0, 0x1000), np.full(4, dram, np.uint64))
    for desc in (masked, gather):
        execute(desc, sim.memory, 0)
        assert replay(desc, sim.memory, 0) is None


def counting_kernel(read_back: bool = False) -> bytes:
    """dst += 1 (64 f32) per iteration, one doorbell of the same descriptor each; with `read_back`,
    the core loads dst[0] right after the doorbell (no fence) and prints it."""
    k = KernelIR()
    n = k.arg(0)
    k.command(D(Op.SIMD_BINARY, subop=SimdOp.ADD, dtype_out=DType.F32, dst=L + 0x400, src0=L + 0x400,
                src1=L, shape=D.dims([64]), dst_stride=ONE, src0_stride=ONE, src1_stride=ONE))
    slot = k.allocas[-1].split(" = ")[0]
    k.emit(f"%dp = ptrtoint ptr {slot} to i64", "br label %l", "l:", "%i = phi i64 [1, %entry], [%i1, %l]")
    k.reg_write(isa.Reg.DOORBELL, "%dp")
    if read_back:
        k.emit(f"%v = load volatile i32, ptr inttoptr (i64 {L + 0x400} to ptr)", "%v64 = zext i32 %v to i64")
        k.reg_write(isa.Reg.PRINT, "%v64")
    k.emit("%i1 = add i64 %i, 1", f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    return k.compile()


@pytest.mark.parametrize("pe", [0, 5])
def test_core_replays_repeated_commands(pe: int) -> None:
    """A kernel ringing the same descriptor many times: one plan per (descriptor, PE), same results."""
    sim = Simulator("mtia-2i", dram_arena_bytes=4 << 20)
    img = sim.load_image(counting_kernel(), entry="kernel")
    ones = np.ones(64, np.float32)
    sim.write(sim.local_address(pe, 0), ones)
    sim.write(sim.local_address(pe, 0x400), np.zeros(64, np.float32))
    res = sim.launch(img, (pe + 1,), [10])
    np.testing.assert_array_equal(sim.from_device(sim.local_address(pe, 0x400), 64, np.float32), 10 * ones)
    events = [e for e in res.traces[pe].events if hasattr(e, "op")]
    assert len(events) == 10  # repeated commands at one pc may share one (read-only) event object
    assert all(replace(e, pc=0) == replace(events[0], pc=0) for e in events)
    assert len({e.pc for e in events}) == 2  # the first doorbell is before the loop
    # at most one Python plan per (descriptor, PE); PEs after the first may run it from a native
    # plan shared by every PE (mtia_sim/fastpath/reloc.py) and need none
    assert len([key for key in sim.memory.plan_cache if key[1] == pe]) <= 1


def test_replay_reports_data_dependent_errors_like_a_full_execution() -> None:
    """POW of integers with a negative exponent is illegal; a replayed command reports it the same way."""
    k = KernelIR()
    pow_desc = D(Op.SIMD_BINARY, subop=SimdOp.POW, dtype_out=DType.I32, dst=L + 0x200, src0=L, src1=L + 0x100,
                 shape=D.dims([4]), dst_stride=ONE, src0_stride=ONE, src1_stride=ONE)
    k.command(pow_desc)
    k.command(pow_desc)  # second sighting: the plan is built
    k.fence()
    k.emit(f"store volatile i32 -1, ptr inttoptr (i64 {L + 0x100} to ptr)")
    k.command(pow_desc)  # replayed on data that makes it illegal
    sim = Simulator("mtia-2i", dram_arena_bytes=4 << 20)
    img = sim.load_image(k.compile(), entry="kernel")
    sim.write(sim.local_address(0, 0), np.full(4, 3, np.int32))
    sim.write(sim.local_address(0, 0x100), np.full(4, 2, np.int32))
    with pytest.raises(IllegalCommandError, match="SIMD_BINARY: invalid operand combination") as info:
        sim.launch(img, (1,), [])
    assert info.value.location.pc is not None and info.value.location.pe == 0
