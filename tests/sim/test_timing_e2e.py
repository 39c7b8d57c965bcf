"""The timing model on real Triton kernels lowered by kegen: scalar loops pay the memory system,
a plain GEMM's re-reads hit the SRAM cache, and re-timing a launch never changes its results."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from lowering.backend import driver  # noqa: E402
from lowering.corpus.elementwise import vector_add  # noqa: E402
from lowering.corpus.matmul import matmul  # noqa: E402
from mtia_sim.timing import simulate  # noqa: E402


@triton.jit
def scalar_add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for i in range(BLOCK):
        off = pid * BLOCK + i
        if off < n:
            tl.store(z_ptr + off, tl.load(x_ptr + off) + tl.load(y_ptr + off))


def test_scalar_loop_vector_add_is_slower_than_dma_and_counts_dram_bytes():
    n, block = 2048, 256
    x, y = torch.randn(n), torch.randn(n)
    z = torch.empty(n)
    scalar_add[(n // block,)](x, y, z, n, BLOCK=block)
    torch.testing.assert_close(z, x + y)
    scalar = driver.last_launch()
    vector_add[(n // block,)](x, y, z, n, BLOCK=block)
    dma = driver.last_launch()
    assert scalar.cycles > 2 * dma.cycles
    c = scalar.counters
    assert c.roofline.dram_bytes >= 3 * 4 * n  # two loads and a store per element
    assert c.totals["CORE"].bytes_read.get("dram", 0) >= 3 * 4 * n
    assert dict(c.stall_reasons()).get("CORE:scalar_mem", 0) > 0


def test_plain_triton_gemm_rereads_hit_the_sram_cache():
    n, b = 128, 32
    a, bm = torch.randn(n, n).half(), torch.randn(n, n).half()
    c = torch.empty(n, n)
    matmul[(n // b, n // b)](a, bm, c, n, n, n, n, 1, n, 1, n, 1, BM=b, BN=b, BK=b)
    torch.testing.assert_close(c, (a.float() @ bm.float()), atol=1e-1, rtol=1e-2)
    res = driver.last_launch()
    cache = res.counters.sram_cache
    assert cache["mode"] == "cache" and cache["hit_lines"] > cache["miss_lines"]
    assert res.counters.bandwidth["sram"]["bytes"] > res.counters.bandwidth["dram"]["bytes"]
    # the same traces re-timed: placement changes time, never what ran
    off = simulate(res.timing.machine, res.traces, sram_mode="off")
    resident = simulate(res.timing.machine, res.traces, sram_mode="resident")
    assert resident.cycles <= res.cycles <= off.cycles
    assert off.counters.flops == resident.counters.flops == res.counters.flops
    assert resident.counters.bandwidth["dram"]["bytes"] == 0


def test_sram_mode_launch_option_reaches_the_timing_model():
    n, b = 64, 32
    a, bm = torch.randn(n, n).half(), torch.randn(n, n).half()
    c = torch.empty(n, n)
    seen = {}
    for mode in ("cache", "resident", "off"):
        matmul[(n // b, n // b)](a, bm, c, n, n, n, n, 1, n, 1, n, 1, BM=b, BN=b, BK=b, sram_mode=mode)
        res = driver.last_launch()
        seen[mode] = (res.counters.sram_cache["mode"], res.counters.bandwidth["dram"]["bytes"], res.cycles)
    assert [seen[m][0] for m in seen] == ["cache", "resident", "off"]
    assert seen["resident"][1] == 0 < seen["cache"][1] < seen["off"][1]
    assert seen["resident"][2] < seen["cache"][2] < seen["off"][2]
    with pytest.raises(Exception, match="sram_mode must be one of"):
        matmul[(1, 1)](a, bm, c, n, n, n, n, 1, n, 1, n, 1, BM=b, BN=b, BK=b, sram_mode="l2")
