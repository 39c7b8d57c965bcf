"""The fidelity report (tools/fidelity_report.py): its table logic, and (slow) real microbenchmarks that
reach the published peaks without exceeding them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _tool():
    from kegen.modules import load_module_from_file

    return load_module_from_file(TOOLS / "fidelity_report.py", "fidelity_report", wrap_errors=False)


def test_rows_flag_anything_above_the_published_peak():
    fr = _tool()
    ok = fr._row("peak fp16 FLOP/s", 177e12, 170e12, "k")
    assert not ok["above_peak"] and ok["fraction"] == pytest.approx(170 / 177)
    assert fr._row("DRAM bytes/s", 204.8e9, 205e9, "k")["above_peak"]


def test_published_figures_match_the_machine_descriptions():
    from mtia_sim.machine import load_machine

    fr = _tool()
    for name, pub in fr.PUBLISHED.items():
        m = load_machine(name)
        assert m.clock_hz == pytest.approx(pub["clock_hz"])
        assert m.dram_bw == pytest.approx(pub["dram_bw"]) and m.sram_bw == pytest.approx(pub["sram_bw"])
        assert m.local_store_bw == pytest.approx(pub["local_store_bw"])
        for dtype, peak in pub["peak_flops"].items():  # descriptions round per-PE rates: within 1%
            assert m.peak_flops(dtype) == pytest.approx(peak, rel=0.01)


@pytest.mark.slow
def test_real_microbenchmarks_reach_but_never_exceed_the_peaks():
    fr = _tool()
    fk = sys.modules["fidelity_kernels"]
    run = fk.run_copy("mtia-2i", 4 << 20, programs=64, modes=("cache", "resident"))
    dram = fr._row("DRAM", fr.PUBLISHED["mtia-2i"]["dram_bw"], fr._bw(run.timing("cache"), "dram"), "copy")
    sram = fr._row("SRAM", fr.PUBLISHED["mtia-2i"]["sram_bw"], fr._bw(run.timing("resident"), "sram"), "copy")
    for row in (dram, sram):
        assert not row["above_peak"] and row["fraction"] > 0.9, row
    dot = fk.run_dot_loop("mtia-2i", "fp16", iters=32, programs=64)
    flops = fr._row("fp16", fr.PUBLISHED["mtia-2i"]["peak_flops"]["fp16"], fr._kernel_rate(dot.timing("resident")),
                    "dot_loop")
    assert not flops["above_peak"] and flops["fraction"] > 0.85, flops
