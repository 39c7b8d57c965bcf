"""The shared profile schema: metrics registry, round trips, the mtia builder, bottleneck, diagnosis,
comparison, renderers, stall meanings and trace labels (no simulator run: fake launch records and
the stored profiles of tests/search/golden)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from kegen.eval.trusted.profile_gpu import merge_ncu
from kegen.profiling import METRICS, Profile, diagnose, from_host_timing, from_mtia_launches
from kegen.profiling.bottleneck import launch_bottleneck
from kegen.profiling.compare import changes, explain
from kegen.profiling.render import diagnosis_line, html, prompt, source_view, terminal
from kegen.profiling.schema import LaunchStat
from kegen.profiling.stalls import UNKNOWN, stall_info, stall_unit
from mtia_sim.events import CommandEvent, MemLevel
from mtia_sim.isa import Op, Unit
from mtia_sim.trace import label_events, source_labels

GOLDEN = Path(__file__).parents[1] / "search" / "golden"


def _golden(name: str) -> Profile:
    return Profile.from_dict(json.loads((GOLDEN / name).read_text()))


SEED, SPLIT, GEMM = (
    _golden("softmax_seed.profile.json"),
    _golden("softmax_split_rows.profile.json"),
    _golden("gemm_seed.profile.json"),
)


def test_every_metric_is_declared_with_unit_and_description() -> None:
    for prof in (SEED, SPLIT, GEMM):
        undeclared = set(prof.metrics) - set(METRICS)
        assert not undeclared, f"metrics without a declaration in METRICS: {undeclared}"
    assert all(m.unit and len(m.description) > 10 for m in METRICS.values())


def test_round_trip_and_older_shapes() -> None:
    assert Profile.from_dict(json.loads(json.dumps(SEED.to_dict()))) == SEED
    old = {
        "target": "mtia",
        "device": "mtia-2i",
        "time_s": 1e-6,
        "kernels": [{"name": "k", "calls": 1, "total_s": 1e-6, "share": 1.0, "extra": {}}],
        "units": [{"name": "DMA", "busy_cycles": 10.0, "utilization": 0.5, "extra": {}, "future": 1}],
        "stalls": [["DMA:dependency", 5.0]],
        "some_future_field": {"x": 1},
    }
    p = Profile.from_dict(old)
    assert p.units[0].utilization == 0.5 and p.stalls == {"DMA:dependency": 5.0} and p.bottleneck is None
    assert "DMA" in terminal(p)
    cpu = from_host_timing(2e-6, {"bound": "memory", "fraction": 0.5})
    assert cpu.metric("roofline_fraction") == 0.5 and "no hardware counters" in terminal(cpu)


def _counters(pes: dict[int, float], kernel_cycles: float, dram_fraction: float) -> dict:
    busy = sum(pes.values())
    return {
        "clock_hz": 1e9,
        "kernel_cycles": kernel_cycles,
        "launch_cycles": 100.0,
        "flops": 64,
        "bandwidth": {"dram": {"bytes": 4096.0, "peak_bw": 1e11, "fraction": dram_fraction}},
        "stall_reasons": {"SIMD:dependency": 300.0},
        "sram_cache": {"read_hit_bytes": 300.0, "read_miss_bytes": 100.0},
        "core_time": {"busy": 40.0, "stall:end_wait_DMA": 10.0},
        "totals": {
            "DMA": {
                "busy_cycles": busy,
                "commands": 2 * len(pes),
                "bytes_read": {"dram": 2048, "sram": 512},
                "bytes_written": {"dram": 2048, "local": 2048},
                "stall_cycles": {"unit_busy": 50.0},
            },
            "SIMD": {"busy_cycles": 100.0, "commands": 4, "flops": 64, "stall_cycles": {"dependency": 300.0}},
            "CORE": {"busy_cycles": 50.0, "commands": len(pes)},
        },
        "pes": {str(pe): {"units": {"DMA": {"busy_cycles": b}}} for pe, b in pes.items()},
    }


def _record(kernel: str, grid: tuple[int, int, int], counters: dict, commands: list, tags: tuple) -> object:
    timing = SimpleNamespace(
        commands=commands, programs=[SimpleNamespace(pe=p, core=0) for p in range(grid[0])]
    )
    seconds = (counters["kernel_cycles"] + counters["launch_cycles"]) / counters["clock_hz"]
    result = SimpleNamespace(seconds=seconds, counters=counters, timing=timing)
    return SimpleNamespace(kernel=kernel, grid=grid, result=result, tags=tags)


def _cmd(tag: int, start: float, end: float, unit: Unit = Unit.DMA, op: Op = Op.DMA_COPY) -> object:
    ev = CommandEvent(op=op, unit=unit, subop=0, elements=64, tag=tag, bytes_read={MemLevel.DRAM: 256})
    return SimpleNamespace(pe=0, start=start, end=end, event=ev, wait_dependency=5.0, wait_bandwidth=0.0,
                           wait_unit=0.0)  # fmt: skip


def test_mtia_builder_reads_occupancy_units_lines_and_bottleneck(tmp_path) -> None:
    src = tmp_path / "cand.py"
    src.write_text("line one\n    x = tl.load(p)\n    y = x * 2\n")
    tags = ("tt.load " + str(src) + ":2:9", "arith.mulf " + str(src) + ":3:9")
    commands = [_cmd(1, 0, 800), _cmd(1, 800, 900), _cmd(2, 0, 100, Unit.SIMD, Op.SIMD_BINARY)]
    rec = _record("k", (16, 1, 1), _counters({p: 900.0 for p in range(16)}, 1000.0, 0.05), commands, tags)
    prof = from_mtia_launches(
        [rec], "mtia-2i", {"bytes": 2048, "flops": 64, "time_s": 1e-8, "bound": "memory"}
    )
    st = prof.launches[0]
    assert (st.programs, st.pes_used, st.pes_total) == (16, 16, 64)
    assert st.busiest_unit == "DMA" and abs(st.busiest_util - 0.9) < 1e-9
    dma = prof.unit("DMA")
    assert (
        dma is not None and abs(dma.utilization_active - 0.9) < 1e-9 and abs(dma.utilization - 0.225) < 1e-9
    )
    assert prof.metric("pes_used") == 16 and abs(prof.metric("idle_pe_pct") - 75.0) < 1e-9
    assert prof.level("dram").compulsory_bytes == 2048 and prof.metric("dram_excess") == 2.0
    assert prof.metric("sram_hit_rate_pct") == 75.0 and prof.level("sram").hit_rate == 0.75
    assert prof.unit("CORE").extra["time_breakdown"] == {"busy": 40.0, "stall:end_wait_DMA": 10.0}
    assert prof.stalls == {"SIMD:dependency": 300.0}  # queueing (unit_busy) is not idle time
    b = prof.bottleneck
    assert b is not None and (b.kind, b.name, b.category) == ("occupancy", "idle PEs", "memory")
    assert any("16 of 64 PEs (48 PEs idle)" in e for e in b.evidence)
    top = prof.lines[0]
    assert (top.location, top.line, top.commands, top.cycles) == ("cand.py:2", 2, 2, 900.0)
    assert (
        top.text == "x = tl.load(p)" and top.bytes == {"dram": 512.0} and top.stall_cycles["dependency"] == 10
    )
    assert abs(sum(ln.share for ln in prof.lines) - 1.0) < 1e-9
    assert st.tag_lines == [2, 3] and st.source_file == "cand.py"
    view = source_view(prof)
    assert "cand.py:2" in view and "x = tl.load(p)" in view and "cand.py:3" in view


def test_bottleneck_rules() -> None:
    def launch(
        pes: int, util: float, unit: str = "DMA", overhead: float = 0.0, programs: int = 0
    ) -> LaunchStat:
        return LaunchStat("k", [programs or pes, 1, 1], 1e-6, programs or pes, pes, 64, pes, 128,
                          overhead, 1.0, unit, util)  # fmt: skip

    def c(frac: float) -> dict:
        return {"bandwidth": {"dram": {"fraction": frac}}, "kernel_cycles": 1000.0}

    assert launch_bottleneck(launch(64, 0.5), c(0.8)).name == "dram"
    assert launch_bottleneck(launch(64, 0.5, overhead=6e-7), c(0.1)).kind == "launch_overhead"
    assert launch_bottleneck(launch(16, 0.8), c(0.1)).kind == "occupancy"
    unit = launch_bottleneck(launch(64, 0.9, "SIMD"), c(0.1))
    assert (unit.kind, unit.name, unit.category) == ("unit", "SIMD", "compute")
    assert launch_bottleneck(launch(64, 0.2), c(0.1)).kind == "latency"
    # enough programs but few PEs used (e.g. a blocked mapping) is no grid problem unless mostly idle
    assert launch_bottleneck(launch(40, 0.7, programs=128), c(0.1)).kind == "unit"


def test_diagnosis_of_measured_profiles() -> None:
    seed = diagnose(SEED.to_dict())
    assert seed.bottleneck.kind == "occupancy" and seed.bottleneck.kernel == "row_stats_kernel"
    assert seed.remedies[0][0] == "parallelism" and seed.bound == "memory" and seed.idle_pes > 0.4
    assert "48 PEs idle" in " ".join(seed.facts)
    gemm = diagnose(GEMM)
    assert gemm.bottleneck.name == "DMA" and {"fewer_bytes", "bigger_commands"} <= set(dict(gemm.remedies))
    legacy = diagnose({"bound": "memory", "utilisation": {"dma": 0.8}, "top_stall_reasons": [["x", 0.5]]})
    assert legacy.bound == "memory" and legacy.weights() == {"fewer_bytes": 1.0}
    assert "memory-bound" in diagnosis_line(legacy)
    assert diagnosis_line(diagnose({})) == "no profile available" and diagnose(None).weights() == {}


def test_comparison_explains_the_fixed_idle_pes() -> None:
    why = explain(SEED, SPLIT)
    assert why.startswith("2.76x faster") and "fixes the idle PEs: 16 -> 64 of 64" in why
    diff = changes(SEED, SPLIT)
    assert diff[0].startswith("time 9.44 us -> 3.43 us") and any(
        "row_stats_kernel is gone" in d for d in diff
    )
    assert explain(SPLIT, SEED).startswith("2.76x slower")


def test_renderers_share_one_schema() -> None:
    text = terminal(SEED)
    for part in (
        "measured bottleneck: idle PEs",
        "row_stats_kernel",
        "16/64 PEs (48 idle)",
        "compulsory",
        "seed.py:",
    ):
        assert part in text
    sizes = [len(prompt(SEED, parent=None, detail=d)) for d in (3, 2, 1, 0)]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < 300
    assert "change from the parent" in prompt(SPLIT, parent=SEED)
    page = html(GEMM)
    assert "<table>" in page and "matmul_kernel" in page and "&lt;" not in page.split("<table>")[0]


def test_stall_meanings() -> None:
    assert stall_info("CORE:fence_wait_DMA").remedies == ("overlap",)
    assert stall_info("SIMD:dependency") is stall_info("DMA:dependency")
    assert "memory loads" in stall_info("long_scoreboard").meaning
    assert stall_info("SRAM:sram_cache_miss").remedies == ("fewer_bytes",)  # a newer counter, by name
    assert stall_info("X:never_heard_of") is UNKNOWN
    assert stall_unit("CORE:queue_full_SIMD") == "SIMD" and stall_unit("DMA:dependency") == "DMA"


def test_gpu_ncu_rows_fill_the_schema() -> None:
    prof = Profile(target="nvidia", device="H200", time_s=1e-5, roofline={"bytes": 1000})
    rows = [{"kernel": "k", "time_ns": 1000.0, "dram_bw_pct": 85.0, "sm_throughput_pct": 20.0,
             "occupancy_pct": 50.0, "l2_hit_rate_pct": 40.0, "dram_bytes": 2000.0,
             "stall:long_scoreboard": 3.0, "stall:selected": 1.0, "stall:wait": 1.0}]  # fmt: skip
    merge_ncu(prof, rows)
    assert prof.level("dram").bytes_total == 2000.0 and prof.level("l2").hit_rate == 0.4
    assert prof.metric("dram_excess") == 2.0 and set(prof.stalls) == {"long_scoreboard", "wait"}
    d = diagnose(prof)
    assert d.bottleneck.name == "dram" and d.remedies[0][0] == "fewer_bytes"


def test_trace_events_are_labelled_by_source_line() -> None:
    labels = source_labels(["tt.load /tmp/x/seed.py:19:12", "no position", "tt.store seed.py:27:4"])
    assert labels == {1: "seed.py:19", 3: "seed.py:27"}
    events = [
        {"ph": "X", "name": "DMA_COPY #1", "args": {"tag": 1}},
        {"ph": "X", "name": "x", "args": {"tag": 2}},
    ]
    assert label_events(events, labels, {1: "x = tl.load(p)"}) == 1
    assert events[0]["name"] == "DMA_COPY seed.py:19" and events[0]["args"]["source_text"] == "x = tl.load(p)"
