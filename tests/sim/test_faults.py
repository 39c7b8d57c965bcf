"""Faults in real programs give the right error type and a message naming where it happened."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mtia_sim import (
    CoreTrapError,
    DeviceAssertError,
    IllegalCommandError,
    LocalStoreOverflowError,
    MemoryFaultError,
    MisalignedDescriptorError,
    RunawayError,
    Simulator,
    isa,
)
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Op, Reg, SimdOp
from tests.sim.rv import KernelIR


def launch(sim: Simulator, k: KernelIR, grid=(1, 1, 1), args=()):
    image = sim.load_image(k.compile(), entry="kernel")
    return sim.launch(image, grid, list(args))


def assert_located(msg: str, pe: int, program: tuple[int, int, int]) -> None:
    assert f"pe {pe}" in msg and "core 0" in msg and f"program {program}" in msg, msg
    assert re.search(r"pc 0x1[0-9a-f]{4}", msg), msg


def test_runaway_loop() -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20, max_instructions=100_000)
    k = KernelIR()
    k.emit("br label %spin", "spin:", f"%v = load volatile i64, ptr inttoptr (i64 {isa.MMIO_BASE + Reg.PE_ID} to ptr)",
           "br label %spin", "dead:")
    with pytest.raises(RunawayError, match="instruction budget of 100000") as e:
        launch(sim, k, grid=(3, 1, 1))
    assert_located(str(e.value), 0, (0, 0, 0))


def test_command_budget() -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20, max_commands=5)
    k = KernelIR()
    for _ in range(6):
        k.command(D(Op.SIMD_FILL, dtype_out=DType.F32, dst=isa.LOCAL_BASE, shape=[1, 1, 1, 4],
                    dst_stride=[0, 0, 0, 1]))
    with pytest.raises(RunawayError, match="command budget of 5"):
        launch(sim, k)


def test_wild_store(sim: Simulator) -> None:
    k = KernelIR()
    k.emit("store volatile i32 7, ptr inttoptr (i64 3735928559 to ptr)")  # 0xdeadbeef
    with pytest.raises(MemoryFaultError, match="wild write of 4 bytes") as e:
        launch(sim, k)
    assert "address 0xdeadbeef" in str(e.value)
    assert_located(str(e.value), 0, (0, 0, 0))


def test_wild_load_of_null(sim: Simulator) -> None:
    k = KernelIR()
    p = k.arg(0)
    q = k.tmp()
    k.emit(f"{q} = inttoptr i64 {p} to ptr", f"%val = load volatile i64, ptr {q}")
    with pytest.raises(MemoryFaultError, match="wild read") as e:
        launch(sim, k, args=[16])
    assert "address 0x10]" in str(e.value) or "address 0x10," in str(e.value) or "address 0x10" in str(e.value)


def test_local_store_overflow(sim: Simulator) -> None:
    k = KernelIR()
    n = sim.memory.local_limit // 4  # one element too many from offset 4
    k.command(D(Op.SIMD_FILL, dtype_out=DType.F32, dst=isa.LOCAL_BASE + 4, shape=[1, 1, 1, n],
                dst_stride=[0, 0, 0, 1], tag=77))
    with pytest.raises(LocalStoreOverflowError) as e:
        launch(sim, k, grid=(2, 1, 1))
    msg = str(e.value)
    assert "SIMD_FILL tag=77" in msg and "address 0x10000004" in msg
    assert_located(msg, 0, (0, 0, 0))


def test_bad_opcode(sim: Simulator) -> None:
    k = KernelIR()
    k.command(D(Op.SIMD_FILL, dtype_out=DType.F32, dst=isa.LOCAL_BASE, shape=[1, 1, 1, 4]), w0=0x777)
    with pytest.raises(IllegalCommandError, match="unknown command opcode 0x777") as e:
        launch(sim, k)
    assert_located(str(e.value), 0, (0, 0, 0))


def test_illegal_subop_names_command(sim: Simulator) -> None:
    k = KernelIR()
    k.command(D(Op.SIMD_UNARY, subop=SimdOp.NOT, dtype_out=DType.F32, dst=isa.LOCAL_BASE, src0=isa.LOCAL_BASE,
                shape=[1, 1, 1, 4], dst_stride=[0, 0, 0, 1], src0_stride=[0, 0, 0, 1], tag=5))
    with pytest.raises(IllegalCommandError, match="SIMD_UNARY tag=5"):
        launch(sim, k)


def test_misaligned_descriptor(sim: Simulator) -> None:
    k = KernelIR()
    k.reg_write(Reg.DOORBELL, isa.LOCAL_BASE + 4)
    with pytest.raises(MisalignedDescriptorError, match="address 0x10000004") as e:
        launch(sim, k)
    assert_located(str(e.value), 0, (0, 0, 0))


def test_device_assert(sim: Simulator) -> None:
    k = KernelIR()
    x = k.pid(0)
    c, s = k.tmp(), k.tmp()
    k.emit(f"{c} = icmp eq i64 {x}, 2", f"{s} = select i1 {c}, i64 3, i64 0")
    k.reg_write(Reg.EXIT, s)
    with pytest.raises(DeviceAssertError, match="status 3") as e:
        launch(sim, k, grid=(4, 1, 1))
    assert_located(str(e.value), 2, (2, 0, 0))


def test_exit_zero_ends_program_early(sim: Simulator) -> None:
    k = KernelIR()
    k.reg_write(Reg.EXIT, 0)
    k.reg_write(Reg.PRINT, 99)
    res = launch(sim, k, grid=(2, 1, 1))
    assert res.programs == 2 and res.debug_log == []


def test_trap_on_ebreak_like_illegal_code(sim: Simulator) -> None:
    k = KernelIR()
    # jump into the stack (non-executable memory): an instruction fetch fault
    k.emit(f"call void inttoptr (i64 {isa.STACK_BASE + 64} to ptr)()")
    with pytest.raises((MemoryFaultError, CoreTrapError)) as e:
        launch(sim, k)
    assert "pe 0" in str(e.value)


def test_simulator_usable_after_fault(sim: Simulator) -> None:
    k = KernelIR()
    k.emit("store volatile i32 7, ptr inttoptr (i64 16 to ptr)")
    with pytest.raises(MemoryFaultError):
        launch(sim, k)
    ok = KernelIR()
    ok.reg_write(Reg.PRINT, ok.reg_read(Reg.PROGRAM_ID_X))
    res = launch(sim, ok, grid=(3, 1, 1))
    assert [v for _, v in res.debug_log] == [0, 1, 2]
    assert np.all(np.array([t.instructions for t in res.traces]) > 0)


@pytest.mark.parametrize("words,what", [([115, 0], "ecall"), ([0, 0], "illegal instruction")])
def test_core_traps(sim: Simulator, words, what) -> None:
    """Jump into data holding an ecall (0x00000073) or an all-zero (illegal) instruction."""
    k = KernelIR()
    k.extra.append(f"@code = global [2 x i32] [i32 {words[0]}, i32 {words[1]}], align 4")
    k.emit("call void @code()")
    with pytest.raises(CoreTrapError, match=what) as e:
        launch(sim, k)
    assert_located(str(e.value), 0, (0, 0, 0))
