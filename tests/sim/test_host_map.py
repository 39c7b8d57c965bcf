"""Zero-copy host buffers: map_host makes host memory DRAM; kernels read and write it in place."""

from __future__ import annotations

import numpy as np
import pytest

from mtia_sim import MemoryFaultError, Simulator, isa
from mtia_sim.events import CoreEvent, MemLevel
from mtia_sim.isa import CommandDescriptor as D
from mtia_sim.isa import DType, Op
from tests.sim.test_programs import vector_add_kernel
from tests.sim.test_scalar_access import scalar_copy_kernel

ONE = [0, 0, 0, 1]


@pytest.fixture()
def hsim() -> Simulator:
    return Simulator("mtia-2i", dram_arena_bytes=8 << 20, max_instructions=10**6)


def test_kernel_reads_and_writes_mapped_arrays_in_place(hsim: Simulator) -> None:
    n = 1000
    rng = np.random.default_rng(1)
    backing = np.zeros(3 * n + 7, np.float32)  # unaligned views into one host allocation
    x, y, out = backing[1:n + 1], backing[n + 3:2 * n + 3], backing[2 * n + 5:3 * n + 5]
    x[:], y[:] = rng.standard_normal(n), rng.standard_normal(n)
    out[:] = -7
    addrs = [hsim.map_host(a) for a in (x, y, out)]
    assert all(a >= isa.DRAM_BASE + hsim.memory.dram_limit for a in addrs)
    img = hsim.load_image(vector_add_kernel(), entry="kernel")
    res = hsim.launch(img, (-(-n // 256),), [*addrs, n])
    np.testing.assert_array_equal(out, x + y)  # the host array itself, no copy back
    np.testing.assert_array_equal(hsim.from_device(addrs[2], n, np.float32), out)
    load = next(e for e in res.traces[0].events if getattr(e, "op", None) == Op.DMA_COPY)
    assert load.bytes_read == {MemLevel.DRAM: 1024}
    hsim.write(addrs[0], np.full(n, 2.0, np.float32))
    assert np.all(x == 2.0)
    for a in addrs:
        hsim.unmap_host(a)
    assert backing[0] == 0 and backing[n + 1] == 0, "bytes outside the buffers are untouched"


def test_scalar_core_accesses_to_mapped_memory_count_as_dram(hsim: Simulator) -> None:
    n = 64
    x, out = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    xa, oa = hsim.map_host(x), hsim.map_host(out)
    img = hsim.load_image(scalar_copy_kernel(), entry="kernel")
    res = hsim.launch(img, (1,), [xa, oa, n])
    np.testing.assert_array_equal(out, x)
    first = next(e for e in res.traces[0].events if isinstance(e, CoreEvent))
    assert first.mem_accesses == (("dram", 2 * n, 8 * n),)


def test_gather_from_mapped_memory_and_unmap(hsim: Simulator) -> None:
    table = np.arange(100, dtype=np.int32) * 3
    ta = hsim.map_host(table)
    idx = np.array([5, 0, 99, 42], np.uint64)
    hsim.write(hsim.local_address(0, 0x100), ta + 4 * idx)
    gather = D(Op.DMA_GATHER, dtype_out=DType.I32, dst=isa.LOCAL_BASE, src1=isa.LOCAL_BASE + 0x100,
               shape=D.dims([4]), dst_stride=ONE, src1_stride=ONE)
    hsim.execute(gather)
    np.testing.assert_array_equal(hsim.from_device(hsim.local_address(0, 0), 4, np.int32), table[idx.astype(int)])
    copy = D(Op.DMA_COPY, dtype_out=DType.I32, dst=isa.LOCAL_BASE, src0=ta, shape=D.dims([100]), dst_stride=ONE,
             src0_stride=ONE)
    hsim.execute(copy)
    hsim.unmap_host(ta)
    with pytest.raises(MemoryFaultError):
        hsim.execute(copy)
    with pytest.raises(MemoryFaultError):
        hsim.read(ta, 4)
    with pytest.raises(ValueError, match="not a mapped host buffer"):
        hsim.unmap_host(ta)


def test_map_host_rejects_bad_buffers(hsim: Simulator) -> None:
    with pytest.raises(ValueError, match="C-contiguous"):
        hsim.map_host(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(ValueError, match="positive size"):
        hsim.map_host(0x1000, 0)
    with pytest.raises(TypeError, match="nbytes"):
        hsim.map_host(0x1000)


def test_map_a_received_bytearray_in_place(hsim: Simulator) -> None:
    """The device process maps the bytearrays it receives: kernels update them with no copy back."""
    blob = bytearray(np.arange(256, dtype=np.float32).tobytes())
    addr = hsim.map_host(blob)
    fill = D(Op.DMA_COPY, dtype_out=DType.F32, dst=addr, src0=addr + 512, shape=D.dims([64]), dst_stride=ONE,
             src0_stride=ONE)
    hsim.execute(fill)
    np.testing.assert_array_equal(np.frombuffer(blob, np.float32)[:64], np.arange(128, 192, dtype=np.float32))
    with pytest.raises(ValueError, match="unmap_host, not free"):
        hsim.free(addr)
    hsim.unmap_host(addr)
    with pytest.raises(ValueError, match="writable"):
        hsim.map_host(memoryview(bytes(16)))


def test_simulator_budgets_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEGEN_SIM_DRAM_ARENA_BYTES", str(32 << 20))
    monkeypatch.setenv("KEGEN_SIM_MAX_INSTRUCTIONS", "12345")
    s = Simulator("mtia-2i")
    assert s.memory.dram_limit == 32 << 20 and s.core.max_instructions == 12345
    assert Simulator("mtia-2i", dram_arena_bytes=16 << 20).memory.dram_limit == 16 << 20
    monkeypatch.setenv("KEGEN_SIM_MAX_INSTRUCTIONS", "lots")
    with pytest.raises(ValueError, match="KEGEN_SIM_MAX_INSTRUCTIONS='lots' is not an integer"):
        Simulator("mtia-2i")
