"""The core's local-store window shows the right PE's store whichever way PEs are switched
(one memfd window remapped per PE, or Unicorn remaps when KEGEN_SIM_SHARED_LOCAL=0)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mtia_sim import Simulator, isa
from tests.sim.rv import KernelIR


def _peek_kernel() -> bytes:
    """Print the i64 at LOCAL_BASE, then store pid + 1000 there (scalar core accesses)."""
    k = KernelIR()
    v = k.tmp()
    k.emit(f"{v} = load volatile i64, ptr inttoptr (i64 {isa.LOCAL_BASE} to ptr)")
    k.reg_write(isa.Reg.PRINT, v)
    w = k.binop("add", k.pid(0), 1000)
    k.emit(f"store volatile i64 {w}, ptr inttoptr (i64 {isa.LOCAL_BASE} to ptr)")
    return k.compile()


@pytest.mark.parametrize("shared", ["1", "0"])
def test_each_program_sees_its_own_pe_s_local_store(shared: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEGEN_SIM_SHARED_LOCAL", shared)
    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    if shared == "1" and sys.platform == "linux":
        assert sim.memory.shared_locals is not None
    pes = sim.num_pes
    for pe in range(pes):
        sim.write(sim.local_address(pe, 0), np.array([pe * 7 + 1], np.int64))
    img = sim.load_image(_peek_kernel(), entry="kernel")
    res = sim.launch(img, (2 * pes,), [])
    # grid order: program p runs on PE p % pes; the first of each PE sees the host's value, the
    # second the first one's store
    got = [v for _, v in res.debug_log]
    want = [pe * 7 + 1 for pe in range(pes)] + [pe + 1000 for pe in range(pes)]
    assert got == want
    for pe in range(pes):
        assert sim.from_device(sim.local_address(pe, 0), 1, np.int64)[0] == pe + pes + 1000


@pytest.mark.skipif(sys.platform != "linux", reason="fork and memfd")
def test_a_forked_child_has_its_own_local_stores() -> None:
    """The shared mapping is copied at fork: the child's writes never reach the parent."""
    import os

    sim = Simulator("mtia-2i", dram_arena_bytes=1 << 20)
    img = sim.load_image(_peek_kernel(), entry="kernel")
    sim.write(sim.local_address(3, 0), np.array([77], np.int64))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run on PE 3, report what it saw, then overwrite
        try:
            res = sim.launch(img, (4,), [])
            os.write(w, str(res.debug_log[3][1]).encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    assert os.read(r, 64) == b"77"  # the child saw the parent's data
    assert sim.from_device(sim.local_address(3, 0), 1, np.int64)[0] == 77  # and did not change it
    res = sim.launch(img, (4,), [])
    assert res.debug_log[3][1] == 77
