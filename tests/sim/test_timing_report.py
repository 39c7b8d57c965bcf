"""Trace JSON (Chrome/Perfetto), the text/JSON profile report and the roofline plot."""

from __future__ import annotations

import json
import random

import pytest

from mtia_sim.events import CoreEvent, MemLevel
from mtia_sim.isa import Unit, UnitMask
from mtia_sim.machine import load_machine
from mtia_sim.report import format_report, plot_roofline, report_dict
from mtia_sim.timing import simulate
from mtia_sim.timing.synthetic import dma, dram_stream, fence, gemm_tiles, matmul, program, random_traces
from mtia_sim.trace import CORE_TID_BASE, trace_json, unit_tid, write_trace

M = load_machine("mtia-2i")
KB = 1024


@pytest.fixture(scope="module")
def pipelined():
    """DMA loads feeding matmuls with a fence per step: memory-bound on 16 PEs."""
    traces = []
    for pe in range(16):
        evs = [CoreEvent(40)]
        for i in range(6):
            buf = (i % 2) * 64 * KB
            evs += [dma(64 * KB, local_addr=buf, tag=7), matmul(128, 128, 128, a=buf, c=200 * KB, tag=9),
                    fence(UnitMask.DPE)]
        evs.append(dma(64 * KB, src=MemLevel.LOCAL, dst=MemLevel.DRAM, local_addr=200 * KB, tag=11))
        traces.append(program(pe, evs, program_id=(pe, 0, 0)))
    return simulate(M, traces)


def test_trace_is_valid_json_with_one_track_per_pe_unit(tmp_path, pipelined):
    path = write_trace(pipelined, tmp_path / "sub" / "trace.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for pe in range(16):
        for unit in (Unit.DMA, Unit.DPE, Unit.SIMD, Unit.RED, Unit.MLU):
            assert names[(pe, unit_tid(unit))] == unit.name
        assert names[(pe, CORE_TID_BASE)] == "core 0"
    spans = [e for e in events if e["ph"] == "X"]
    assert len([e for e in spans if e.get("cat") in ("DMA", "DPE")]) == len(pipelined.commands)
    for e in spans:
        assert (e["pid"], e["tid"]) in names
        assert e["dur"] >= 0 and e["ts"] >= 0
    assert {e["name"] for e in spans if e.get("cat") == "DPE"} == {"DPE_MATMUL #9"}
    first = min(e["ts"] for e in spans if e.get("cat") == "DMA")
    assert first >= pipelined.launch_cycles / M.clock_hz * 1e6 - 1e-9  # after the launch span
    # the same tracks never overlap in time (units are in order)
    by_track: dict = {}
    for e in spans:
        if e.get("cat") in ("DMA", "DPE"):
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for intervals in by_track.values():
        intervals.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(intervals, intervals[1:], strict=False))


def test_trace_of_random_run_serialises():
    r = simulate(M, random_traces(random.Random(3), M, programs=8, commands=8))
    json.dumps(trace_json(r))


def test_report_names_bound_units_and_stalls(pipelined):
    text = format_report(pipelined, M)
    assert "mtia-2i" in text and "roofline" in text and "memory-bound" in text
    assert "DMA_COPY #7" in text and "DPE_MATMUL #9" in text
    assert "top stall reasons" in text and "DPE:dependency" in text
    for unit in ("DMA", "DPE", "CORE"):
        assert f"\n{unit} " in text
    data = report_dict(pipelined, M)
    json.dumps(data)
    assert data["summary"]["bound"] == "memory"
    assert data["units"][0]["unit"] == "DMA"  # the hottest unit comes first
    assert data["stalls"] == sorted(data["stalls"], key=lambda s: -s["share_of_unit_time"])
    assert all(s["hint"] for s in data["stalls"] if s["reason"].endswith("dependency"))


def test_compute_bound_report():
    r = simulate(M, gemm_tiles(M, tile=128, steps=16))
    data = report_dict(r, M)
    assert data["summary"]["bound"] == "compute"
    assert data["units"][0]["unit"] == "DPE" and data["units"][0]["utilization_active_pes"] > 0.9
    assert "compute-bound" in format_report(r, M)


def test_stream_report_shows_dram_bandwidth():
    r = simulate(M, dram_stream(M, 256 * KB))
    text = format_report(r)
    assert "DRAM" in text and "shared_bandwidth" in text
    assert r.counters.bandwidth["dram"]["fraction"] > 0.85


def test_roofline_plot_is_written(tmp_path, pipelined):
    path = plot_roofline(pipelined, M, tmp_path / "roof.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_and_trace_accept_a_launch_result(tmp_path, pipelined):
    class Launch:  # the simulator's LaunchResult carries the TimingResult as .timing
        timing = pipelined
    assert format_report(Launch()) == format_report(pipelined)
    write_trace(Launch(), tmp_path / "t.json")
    with pytest.raises(TypeError, match="TimingResult"):
        format_report(object())


def test_stall_ranking_leaves_out_queueing(pipelined):
    c = simulate(M, gemm_tiles(M, tile=64, steps=8, pes=2)).counters  # matmuls queue behind each other
    assert all(not r.endswith(":unit_busy") for r, _ in c.stall_reasons())
    assert any(r.endswith(":unit_busy") for r, _ in c.stall_reasons(include_queueing=True))
    d = c.to_dict()
    assert d["queue_wait_cycles"]["DPE"] == c.totals["DPE"].stall_cycles["unit_busy"] > 0
    assert pipelined.counters.to_dict()["pes"]["0"]["bandwidth"]["dram"]["bytes"] == 7 * 64 * KB


def test_real_program_through_the_simulator():
    """Contract check with the functional model: a RISC-V kernel's trace replays on this model."""
    sim_mod = pytest.importorskip("mtia_sim.simulator")
    from mtia_sim import isa
    from mtia_sim.isa import CommandDescriptor, DType, Op
    from mtia_sim.rvcompile import compile_ir

    n = 4096
    d = CommandDescriptor(op=Op.DMA_COPY, dtype_out=DType.F32, dtype_in0=DType.F32, dst=isa.LOCAL_BASE,
                          shape=[1, 1, 1, n], dst_stride=[0, 0, 0, 1], src0_stride=[0, 0, 0, 1], tag=5)
    words = [w - (1 << 64) if w >> 63 else w for w in d.to_words()]
    body = ["%desc = alloca [36 x i64], align 8", "%base = load i64, ptr %args"]
    for i, w in enumerate(words):
        body += [f"%p{i} = getelementptr i64, ptr %desc, i64 {i}",
                 f"store volatile i64 {'%base' if i == isa.Field.SRC0 else w}, ptr %p{i}"]
    body += ["%d = ptrtoint ptr %desc to i64",
             f"store volatile i64 %d, ptr inttoptr (i64 {isa.MMIO_BASE + isa.Reg.DOORBELL} to ptr)"]
    ir = "\n".join(["define void @kernel(ptr %args, i32 %px, i32 %py, i32 %pz, i32 %nx, i32 %ny, i32 %nz) {",
                    "entry:", *body, "  ret void", "}", ""])
    sim = sim_mod.Simulator(M, dram_arena_bytes=8 << 20)
    image = sim.load_image(compile_ir(ir), entry="kernel")
    src = sim.alloc(4 * n)
    res = sim.launch(image, (3, 1, 1), [src])
    t = res.timing
    bw = t.counters.bandwidth  # three programs read the same bytes: one DRAM fill, two merge in SRAM
    assert bw["dram"]["bytes"] == 4 * n and bw["dram"]["bytes"] + bw["sram"]["bytes"] == 3 * 4 * n
    assert [c.event.tag for c in t.commands] == [5, 5, 5]
    assert t.cycles == res.cycles > t.kernel_cycles > 0
    assert "DMA_COPY #5" in format_report(res)


def test_trace_has_a_bandwidth_counter_track(pipelined):
    counters = [e for e in trace_json(pipelined)["traceEvents"] if e["ph"] == "C"]
    assert counters and max(e["args"]["DRAM"] for e in counters) <= M.dram_bw / 1e9 * (1 + 1e-9)
    assert max(e["args"]["DRAM"] for e in counters) > 0.5 * M.dram_bw / 1e9


def test_report_shows_load_imbalance():
    """65 equal programs on 64 PEs: one core runs two, so the launch takes about twice as long."""
    traces = [program(i % 64, [CoreEvent(2000)], program_id=(i, 0, 0)) for i in range(65)]
    r = simulate(M, traces)
    b = report_dict(r, M)["balance"]
    assert (b["programs"], b["cores"], b["max_programs_per_core"], b["min_programs_per_core"]) == (65, 64, 2, 1)
    assert b["last_core"] == {"pe": 0, "core": 0} and b["imbalance"] > 1.9
    assert "65 on 64 cores (1-2 per core)" in format_report(r, M)


def test_overlapping_dmas_get_their_own_tracks():
    import dataclasses

    m2 = dataclasses.replace(M, dma_max_in_flight=2)
    r = simulate(m2, [program(0, [dma(16 * KB, local_addr=i * 16 * KB) for i in range(6)])])
    events = trace_json(r)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(0, unit_tid(Unit.DMA, 1))] == "DMA (in flight 2)"
    by_track: dict = {}
    for e in events:
        if e["ph"] == "X" and e.get("cat") == "DMA":
            by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    assert len(by_track) == 2
    for intervals in by_track.values():
        intervals.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(intervals, intervals[1:], strict=False))


def test_copy_kernel_is_memory_bound_against_dram_bandwidth():
    r = simulate(M, dram_stream(M, 256 * KB))
    roof = r.counters.roofline
    assert roof.flops == 0 and roof.bound == "memory"
    assert roof.fraction_of_roofline == pytest.approx(r.counters.bandwidth["dram"]["fraction"])
    assert "no FLOPs: memory-bound" in format_report(r)
