"""One profile schema: the simulator declares every counter it produces (`mtia_sim.stats`), kegen's
METRICS are built from those declarations, the stall table and the number formatting are shared by
the simulator's report and kegen's renderers, and docs/PROFILE.md lists what is declared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kegen.profiling import METRICS, MetricDef
from kegen.profiling.render import fmt_metric
from kegen.profiling.schema import LEVEL_DESCRIPTIONS, UNIT_DESCRIPTIONS
from kegen.profiling.stalls import stall_info
from mtia_sim import counters, stats
from mtia_sim.events import CoreEvent, MemLevel
from mtia_sim.isa import UnitMask
from mtia_sim.machine import load_machine
from mtia_sim.report import report_dict
from mtia_sim.timing import simulate
from mtia_sim.timing.native import STALL_NAMES
from mtia_sim.timing.synthetic import dma, dram_stream, fence, gemm_tiles, matmul, program

M = load_machine("mtia-2i")
KB = 1024
DOC = Path(__file__).parents[2] / "docs" / "PROFILE.md"


@pytest.fixture(scope="module")
def runs() -> list:
    """A load -> matmul -> fence -> store chain per PE (dependency and fence stalls), a DRAM stream
    (shared bandwidth) and matmuls queueing behind each other (unit_busy)."""
    chain = [dma(64 * KB, local_addr=0, tag=1), matmul(128, 128, 128, a=0, c=96 * KB, tag=2), fence(UnitMask.DPE),
             dma(64 * KB, src=MemLevel.LOCAL, dst=MemLevel.DRAM, local_addr=96 * KB, tag=3)]  # fmt: skip
    traces = [program(pe, [CoreEvent(10), *chain], program_id=(pe, 0, 0)) for pe in range(4)]
    return [simulate(M, traces), simulate(M, dram_stream(M, 128 * KB, pes=8)),
            simulate(M, gemm_tiles(M, tile=64, steps=8, pes=2))]  # fmt: skip


def test_every_counter_the_simulator_emits_is_declared(runs) -> None:
    for r in runs:
        d = r.counters.to_dict()
        assert set(d) == set(stats.LAUNCH)
        for u in list(d["totals"].values()) + [u for pe in d["pes"].values() for u in pe["units"].values()]:
            assert set(u) == set(stats.UNIT)
        for level, bw in d["bandwidth"].items():
            assert level in stats.LEVELS and set(bw) == set(stats.BANDWIDTH)
        assert set(d["roofline"]) == set(stats.ROOFLINE)
        assert set(d["sram_cache"]) == set(stats.SRAM_CACHE)
    assert set(counters.UNIT_NAMES) == set(stats.UNITS) and set(counters.LEVELS) == set(stats.LEVELS)
    for table in (stats.LAUNCH, stats.UNIT, stats.BANDWIDTH, stats.ROOFLINE, stats.SRAM_CACHE):
        assert all(s.unit and len(s.description) > 10 and s.name == k for k, s in table.items())


def test_every_stall_reason_is_declared_once_for_report_and_prompts(runs) -> None:
    reasons = {f"CORE:{name}" for name in STALL_NAMES}  # the native replay's core stalls
    for r in runs:
        for unit in r.counters.totals.values():
            reasons |= {f"{unit.unit}:{why}" for why in unit.stall_cycles}
    assert {"DPE:dependency", "DPE:unit_busy", "DMA:shared_bandwidth", "CORE:fence_wait_DPE"} <= reasons
    for reason in reasons:
        declared = stats.stall_reason(reason)
        assert declared is not None, f"undeclared stall reason {reason}"
        info = stall_info(reason)  # kegen's reading: the declared meaning and remedy, plus remedy kinds
        assert (info.meaning, info.remedy) == (declared.meaning, declared.remedy) and info.remedies
    rows = [s for r in runs for s in report_dict(r, M)["stalls"]]
    assert rows and all(s["hint"] == stall_info(s["reason"]).remedy for s in rows)
    assert stats.stall_reason("CORE:fence_wait_DMA").name == "fence_wait"
    assert stats.stall_reason("X:never_heard_of") is None


def test_metrics_are_built_from_the_simulator_declarations() -> None:
    assert MetricDef is stats.Stat
    for name, counter in (("time_s", "seconds"), ("kernel_time_s", "kernel_seconds"), ("flops", "flops")):
        m, c = METRICS[name], stats.LAUNCH[counter]
        assert m.unit == c.unit and m.description.startswith(c.description)
    for level, where in stats.LEVELS.items():
        assert METRICS[f"{level}_bytes"].unit == "B" and where in METRICS[f"{level}_bytes"].description
    assert all(m.name == k and m.unit and len(m.description) > 10 for k, m in METRICS.items())
    assert UNIT_DESCRIPTIONS.items() >= stats.UNITS.items() and "SM" in UNIT_DESCRIPTIONS
    assert LEVEL_DESCRIPTIONS.items() >= stats.LEVELS.items() and "l2" in LEVEL_DESCRIPTIONS


def test_numbers_are_formatted_once() -> None:
    assert stats.fmt_si(1.5e9, "B/s") == "1.50 GB/s" and stats.fmt_si(12.0, "B") == "12 B"
    assert stats.fmt_si(1.5e9, "B/s", spec=".3g", missing="n/a") == "1.5 GB/s"
    assert stats.fmt_si(None, "B") == "?" and stats.fmt_si(float("inf"), "B", missing="n/a") == "n/a"
    assert stats.fmt_time(2.5e-3) == "2.500 ms" and stats.fmt_time(3.43e-6) == "3.43 us"
    assert stats.fmt_pct(0.256) == "26%" and stats.fmt_pct(None) == "-" and stats.fmt_pct(0.5, ".1f") == "50.0%"
    assert fmt_metric("dram_bw_pct", 12.34) == "12.3%" and fmt_metric("time_s", 1e-6) == "1.00 us"
    assert fmt_metric("achieved_dram_bw", 2e11) == "200.00 GB/s" and fmt_metric("dram_excess", 2) == "2.00"
    assert stats.LAUNCH["flops"].format(4.2e9) == "4.20 GFLOP"


def _rows(section: str) -> dict[str, str]:
    """`name -> unit` of the table rows in one section of docs/PROFILE.md (up to the next heading)."""
    text = DOC.read_text()
    start = text.index(section)
    end = text.find("\n#", start + len(section))
    body = text[start : end if end >= 0 else None]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", body, flags=re.M))


def test_profile_md_lists_the_declarations() -> None:
    assert _rows("## Metrics") == {k: m.unit for k, m in METRICS.items()}
    for title, table in (("LAUNCH", stats.LAUNCH), ("UNIT", stats.UNIT), ("BANDWIDTH", stats.BANDWIDTH),
                         ("ROOFLINE", stats.ROOFLINE), ("SRAM_CACHE", stats.SRAM_CACHE)):  # fmt: skip
        assert _rows(f"### `{title}`") == {k: s.unit for k, s in table.items()}, f"docs/PROFILE.md: {title}"
    assert _rows("### Stall reasons").keys() == stats.STALLS.keys()
