"""The native timing replay agrees with the Python one on real Triton kernels lowered by kegen
(corpus kernels of every theme: DMA streams, gathers, atomics, transcendentals, dots, scans)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from lowering.backend import driver  # noqa: E402
from lowering.corpus import get_entry  # noqa: E402
from mtia_sim.timing import native, simulate  # noqa: E402
from mtia_sim.timing.native import loader  # noqa: E402
from tests.sim.test_timing_native import assert_same  # noqa: E402

if loader.load() is None:
    pytest.skip("native timing replay unavailable here", allow_module_level=True)

KERNELS = ["vector_add", "math_functions", "fused_softmax", "matmul_k_loop", "embedding_lookup",
           "atomic_scatter_add", "cumsum", "conv1d_direct"]


@pytest.mark.parametrize("name", KERNELS)
def test_corpus_kernel_native_equals_python(name: str) -> None:
    get_entry(name).check(seed=0)
    res = driver.last_launch()
    m, traces = res.timing.machine, res.traces
    for mode in ("cache", "resident", "off"):
        assert native.replay(m, traces, sram_mode=mode) is not None, f"{name}: native replay refused"
        assert_same(simulate(m, traces, sram_mode=mode, use_native=False), simulate(m, traces, sram_mode=mode))
    small = max(4096, m.sram_line_bytes * 8)  # a tiny cache: evictions and merged misses on real traces
    assert_same(simulate(m, traces, sram_cache_bytes=small, use_native=False),
                simulate(m, traces, sram_cache_bytes=small))
