"""Scalar loads/stores of the control core outside its local store are recorded per CoreEvent."""

from __future__ import annotations

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from mtia_sim.core import Core
from mtia_sim.events import CoreEvent
from tests.sim.rv import KernelIR
from tests.sim.test_programs import vector_add_kernel


def scalar_copy_kernel() -> bytes:
    """out[i] = x[i] for i < n (f32), one scalar load and store per element, then a FENCE; then
    the same loop over the local store (not counted)."""
    k = KernelIR()
    x, out, n = (k.arg(i) for i in range(3))
    k.emit("%xp = inttoptr i64 " + x + " to ptr", "%op = inttoptr i64 " + out + " to ptr",
           "br label %l", "l:", "%i = phi i64 [0, %entry], [%i1, %l]",
           "%sp = getelementptr float, ptr %xp, i64 %i", "%v = load volatile float, ptr %sp",
           "%dp = getelementptr float, ptr %op, i64 %i", "store volatile float %v, ptr %dp",
           "%i1 = add i64 %i, 1", f"%c = icmp ult i64 %i1, {n}", "br i1 %c, label %l, label %e", "e:")
    k.fence()
    local = f"inttoptr (i64 {isa.LOCAL_BASE} to ptr)"
    k.emit("br label %m", "m:", "%j = phi i64 [0, %e], [%j1, %m]",
           f"%lp = getelementptr i32, ptr {local}, i64 %j", "store volatile i32 7, ptr %lp",
           "%j1 = add i64 %j, 1", f"%d = icmp ult i64 %j1, {n}", "br i1 %d, label %m, label %f", "f:")
    return k.compile()


@pytest.mark.parametrize("python_hooks", [False, True])
def test_scalar_dram_accesses_are_recorded(python_hooks: bool) -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=16 << 20, max_instructions=10**6)
    if python_hooks:
        sim.core = Core(sim.memory, max_instructions=10**6, max_commands=100, python_block_hook=True)
    img = sim.load_image(scalar_copy_kernel(), entry="kernel")
    n = 100
    x = np.arange(n, dtype=np.float32)
    xa, oa = sim.to_device(x), sim.to_device(np.zeros(n, np.float32))
    sram = sim.alloc(4 * n, level="sram")
    res = sim.launch(img, (1,), [xa, oa, n])
    np.testing.assert_array_equal(sim.from_device(oa, n, np.float32), x)
    core = [e for e in res.traces[0].events if isinstance(e, CoreEvent)]
    assert core[0].mem_accesses == (("dram", 2 * n, 8 * n),)
    assert all(e.mem_accesses == () for e in core[1:]), "local-store accesses are not scalar DRAM/SRAM ones"
    # reads from DRAM, writes to SRAM: both levels, in one segment
    res = sim.launch(img, (1,), [xa, sram, n])
    first = [e for e in res.traces[0].events if isinstance(e, CoreEvent)][0]
    assert dict((lvl, (a, b)) for lvl, a, b in first.mem_accesses) == {"dram": (n, 4 * n), "sram": (n, 4 * n)}


def test_dma_kernel_records_no_scalar_accesses(sim: Simulator) -> None:
    img = sim.load_image(vector_add_kernel(), entry="kernel")
    n = 512
    xa, ya, oa = (sim.to_device(np.ones(n, np.float32)) for _ in range(3))
    res = sim.launch(img, (2,), [xa, ya, oa, n])
    for t in res.traces:
        assert all(e.mem_accesses == () for e in t.events if isinstance(e, CoreEvent))
