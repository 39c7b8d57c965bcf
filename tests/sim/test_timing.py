"""Timing model behaviour on hand-built traces: costs, overlap, dependencies, fences, sharing, peaks."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from mtia_sim.events import AddrRange, CommandEvent, CoreEvent, EndEvent, FenceEvent, MemLevel
from mtia_sim.isa import Op, SimdOp, Unit, UnitMask
from mtia_sim.machine import MACHINES_DIR, load_machine
from mtia_sim.timing import simulate
from mtia_sim.timing.synthetic import dma, dram_stream, fence, gemm_tiles, matmul, mlu, program, reduce, simd

M = dataclasses.replace(load_machine("mtia-2i"), dma_max_in_flight=1)  # the mechanics below assume one DMA slot
KB = 1024


def _one(events, m=M, **kw):
    return simulate(m, [program(0, events)], **kw)


def _cmd(result, op):
    return next(r for r in result.commands if r.event.op == op)


def test_single_dram_load_matches_the_description():
    n = 64 * KB
    r = _one([CoreEvent(100), dma(n)], launch_overhead=False)
    rate = min(M.dram_bytes_per_cycle, M.local_store_bytes_per_cycle)
    issue = 100 * M.core_cpi + M.command_issue_cycles
    expect = issue + M.dma_setup_cycles + M.dram_latency_cycles + n / rate
    assert r.kernel_cycles == pytest.approx(expect)
    assert r.launch_cycles == 0 and r.cycles == r.kernel_cycles
    rec = r.commands[0]
    assert rec.issue == pytest.approx(issue) and rec.start == pytest.approx(issue)
    assert rec.wait_bandwidth == pytest.approx(0, abs=1e-6)


def test_launch_overhead_is_added_to_the_makespan():
    with_launch = _one([dma(4 * KB)])
    without = _one([dma(4 * KB)], launch_overhead=False)
    assert with_launch.kernel_cycles == without.kernel_cycles
    assert with_launch.cycles - without.cycles == pytest.approx(M.launch_overhead_cycles)
    assert with_launch.seconds == pytest.approx(with_launch.cycles / M.clock_hz)


def test_empty_launch():
    r = simulate(M, [])
    assert r.cycles == 0 and r.commands == [] and r.counters.flops == 0


def test_independent_dma_and_compute_overlap():
    load = dma(64 * KB, local_addr=0)
    mm = matmul(128, 128, 128, a=128 * KB)  # operands elsewhere: no dependency
    both = _one([load, mm], launch_overhead=False)
    d, g = _cmd(both, Op.DMA_COPY), _cmd(both, Op.DPE_MATMUL)
    assert g.start < d.end  # running at the same time
    assert g.wait_dependency == 0
    alone = _one([load], launch_overhead=False).kernel_cycles + _one([mm], launch_overhead=False).kernel_cycles
    assert both.kernel_cycles < 0.8 * alone


def test_dependent_compute_waits_for_its_load():
    load = dma(64 * KB, local_addr=0)
    mm = matmul(128, 128, 128, a=0)  # reads what the DMA writes (RAW)
    r = _one([load, mm], launch_overhead=False)
    d, g = _cmd(r, Op.DMA_COPY), _cmd(r, Op.DPE_MATMUL)
    assert g.start == pytest.approx(d.end)
    assert g.wait_dependency == pytest.approx(d.end - g.issue)


def test_write_after_read_waits():
    mm = matmul(128, 128, 128, a=0)  # reads [0, 64K)
    overwrite = dma(32 * KB, local_addr=0)  # must not clobber the operands before the DPE has read them
    r = _one([mm, overwrite], launch_overhead=False)
    assert _cmd(r, Op.DMA_COPY).start == pytest.approx(_cmd(r, Op.DPE_MATMUL).end)


def test_write_after_write_waits():
    a = simd(4096, src=0, dst=64 * KB)
    b = dma(16 * KB, src=MemLevel.DRAM, local_addr=64 * KB)
    r = _one([a, b], launch_overhead=False)
    assert r.commands[1].start == pytest.approx(r.commands[0].end)


def test_fence_makes_the_core_wait():
    work = [dma(64 * KB), fence(UnitMask.DMA), CoreEvent(1000)]
    r = _one(work, launch_overhead=False)
    d = r.commands[0]
    assert r.kernel_cycles == pytest.approx(d.end + 1000 * M.core_cpi)
    stalls = r.programs[0].stalls
    assert stalls["fence_wait_DMA"] == pytest.approx(d.end - d.issue)
    no_fence = _one([dma(64 * KB), CoreEvent(1000)], launch_overhead=False)
    assert no_fence.kernel_cycles < r.kernel_cycles


def test_fence_on_other_units_does_not_wait_for_dma():
    r = _one([dma(64 * KB), fence(UnitMask.DPE | UnitMask.SIMD), CoreEvent(10)], launch_overhead=False)
    assert r.programs[0].stalls.get("fence_wait_DMA", 0) == 0
    assert r.programs[0].stalls["end_wait_DMA"] > 0  # the end waits for everything


def test_program_end_waits_for_all_commands():
    r = _one([dma(64 * KB), matmul(64, 64, 64, a=200 * KB)], launch_overhead=False)
    assert r.programs[0].end == pytest.approx(max(c.end for c in r.commands))
    assert r.kernel_cycles == pytest.approx(r.programs[0].end)


def test_programs_on_one_core_run_back_to_back_without_job_replacement():
    # a launch is one job: its programs are work items, so no job replacement between them
    traces = [program(3, [CoreEvent(500)], program_id=(i, 0, 0)) for i in range(3)]
    r = simulate(M, traces, launch_overhead=False)
    one = 500 * M.core_cpi
    assert [p.start for p in r.programs] == pytest.approx([0, one, 2 * one])
    assert r.kernel_cycles == pytest.approx(3 * one)


def test_job_replacement_is_charged_between_launches():
    traces = [program(0, [CoreEvent(500)])]
    first = simulate(M, traces)
    queued = simulate(M, traces, launch="replacement")
    assert first.launch_cycles == pytest.approx(M.launch_overhead_cycles)
    assert queued.launch_cycles == pytest.approx(M.job_replacement_cycles)
    assert queued.kernel_cycles == first.kernel_cycles
    assert simulate(M, traces, launch="none").cycles == first.kernel_cycles
    with pytest.raises(ValueError, match="launch must be one of"):
        simulate(M, traces, launch="warm")


def test_pes_and_cores_run_concurrently():
    work = [CoreEvent(1000)]
    spread = [program(pe, work) for pe in range(4)] + [program(5, work, core=1)]
    r = simulate(M, spread, launch_overhead=False)
    assert r.kernel_cycles == pytest.approx(1000 * M.core_cpi)


def test_two_cores_of_a_pe_share_its_units():
    mm = [matmul(128, 128, 128, a=0, c=300 * KB)]
    shared = simulate(M, [program(0, mm, core=0), program(0, mm, core=1)], launch_overhead=False)
    apart = simulate(M, [program(0, mm), program(1, mm)], launch_overhead=False)
    dpe = shared.commands[1].end - shared.commands[1].start
    assert shared.kernel_cycles == pytest.approx(apart.kernel_cycles + dpe, rel=0.01)


def test_full_command_queue_stalls_the_core():
    evs = [simd(4096, src=0, dst=64 * KB) for _ in range(3 * M.command_queue_depth)]
    r = _one(evs, launch_overhead=False)
    assert r.programs[0].stalls.get("queue_full_SIMD", 0) > 0
    deep = dataclasses.replace(M, command_queue_depth=10_000)
    r2 = _one(evs, m=deep, launch_overhead=False)
    assert "queue_full_SIMD" not in r2.programs[0].stalls
    assert r2.kernel_cycles == pytest.approx(r.kernel_cycles)  # the unit is the bottleneck either way


def test_units_are_in_order_queues():
    evs = [simd(4096, src=i * 32 * KB, dst=i * 32 * KB + 16 * KB) for i in range(4)]
    r = _one(evs, launch_overhead=False)
    for a, b in zip(r.commands, r.commands[1:], strict=False):
        assert b.start >= a.end - 1e-9
    assert r.commands[3].wait_unit > 0 and r.commands[3].wait_dependency == 0


def test_dram_bandwidth_is_shared_and_reached():
    traces = dram_stream(M, 512 * KB)
    r = simulate(M, traces, launch_overhead=False)
    bw = r.counters.bandwidth["dram"]["achieved_bw"]
    assert bw <= M.dram_bw * (1 + 1e-9)
    assert bw >= 0.9 * M.dram_bw
    assert r.counters.totals["DMA"].stall_cycles["shared_bandwidth"] > 0
    # one PE alone is limited by the same DRAM, but nobody slows it down
    solo = simulate(M, dram_stream(M, 512 * KB, pes=1), launch_overhead=False)
    assert solo.counters.totals["DMA"].stall_cycles.get("shared_bandwidth", 0) == pytest.approx(0, abs=1e-3)


def test_sram_is_faster_than_dram():
    def stream(level):
        return [program(pe, [dma(64 * KB, src=level, local_addr=(i % 2) * 64 * KB) for i in range(8)])
                for pe in range(64)]
    dram = simulate(M, stream(MemLevel.DRAM), launch_overhead=False)
    sram = simulate(M, stream(MemLevel.SRAM), launch_overhead=False)
    assert sram.counters.bandwidth["sram"]["achieved_bw"] <= M.sram_bw * (1 + 1e-9)
    assert sram.kernel_cycles < dram.kernel_cycles / 5


def test_local_store_bandwidth_per_pe():
    n = 128 * KB
    r = _one([dma(n, src=MemLevel.LOCAL, dst=MemLevel.LOCAL, local_src_addr=0, local_addr=n)],
             launch_overhead=False)
    d = r.commands[0]
    assert d.end - d.start == pytest.approx(M.dma_setup_cycles + 2 * n / M.local_store_bytes_per_cycle)


def test_large_gemms_reach_90_percent_of_dpe_peak():
    r = simulate(M, gemm_tiles(M, tile=128, steps=32), launch_overhead=False)
    achieved = r.counters.roofline.achieved_flops
    assert achieved <= M.peak_flops("fp16") * (1 + 1e-9)
    assert achieved >= 0.9 * M.peak_flops("fp16")
    assert r.counters.roofline.bound == "compute"


def test_small_or_ragged_gemms_pay_setup_and_padding():
    small = simulate(M, gemm_tiles(M, tile=16, steps=32), launch_overhead=False)
    assert small.counters.roofline.achieved_flops < 0.2 * M.peak_flops("fp16")
    even = _one([matmul(128, 128, 128)], launch_overhead=False).commands[0]
    ragged = _one([matmul(129, 128, 128)], launch_overhead=False).commands[0]
    assert ragged.duration > 1.2 * even.duration  # 129 rows pad to 160


def test_dpe_rate_depends_on_operand_width():
    t = {w: _one([matmul(256, 256, 256, dtype_bytes=w)], launch_overhead=False).commands[0].duration
         for w in (1, 2, 4)}
    work = 2 * 256**3
    assert t[2] == pytest.approx(M.dpe_setup_cycles + work / M.dpe_flops_per_cycle_fp16)
    assert t[1] == pytest.approx(M.dpe_setup_cycles + work / M.dpe_flops_per_cycle_int8)
    assert t[4] == pytest.approx(M.dpe_setup_cycles + work / M.dpe_flops_per_cycle_fp32)


def test_simd_reduction_and_mlu_costs():
    n = 32768
    add = _one([simd(n, dtype_bytes=2)], launch_overhead=False).commands[0]
    exp = _one([simd(n, dtype_bytes=2, op=SimdOp.EXP)], launch_overhead=False).commands[0]
    assert add.duration == pytest.approx(M.simd_setup_cycles + n / M.simd_elements_per_cycle(2))
    assert exp.duration == pytest.approx(M.simd_setup_cycles + M.simd_transcendental_factor * n
                                         / M.simd_elements_per_cycle(2))
    red = _one([reduce(n)], launch_overhead=False).commands[0]
    assert red.duration == pytest.approx(M.red_setup_cycles + n / M.red_elements_per_cycle)
    lay = _one([mlu(64 * KB)], launch_overhead=False).commands[0]
    assert lay.duration == pytest.approx(M.mlu_setup_cycles + 64 * KB / M.mlu_bytes_per_cycle)


def test_misaligned_dma_costs_the_penalty():
    n = 64 * KB
    ok = _one([dma(n, src=MemLevel.SRAM)], launch_overhead=False).commands[0]
    bad = _one([dma(n, src=MemLevel.SRAM, misaligned=True)], launch_overhead=False).commands[0]
    fixed = M.dma_setup_cycles + M.sram_latency_cycles
    assert bad.duration - fixed == pytest.approx((ok.duration - fixed) * (1 + M.dma_misaligned_penalty))


def test_remote_local_store_latency_grows_with_hops():
    def dur(remote):
        ev = dma(4 * KB, src=MemLevel.REMOTE_LOCAL, remote_pe=remote)
        return _one([ev], launch_overhead=False).commands[0].duration
    assert dur(63) - dur(1) == pytest.approx((M.hops(0, 63) - M.hops(0, 1)) * M.noc_hop_latency_cycles)


def _toml(data: dict, prefix: str = "") -> str:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    out = [f"[{prefix}]"] if prefix and scalars else []
    out += [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v!r}" for k, v in scalars.items()]
    text = "\n".join(out) + "\n"
    for k, v in data.items():
        if isinstance(v, dict):
            text += _toml(v, f"{prefix}.{k}" if prefix else k)
    return text


def _write_machine(tmp_path, edit):
    """The shipped mtia-2i description with `edit` applied, written to a temp file and loaded."""
    data = tomllib.loads((MACHINES_DIR / "mtia-2i.toml").read_text())
    edit(data)
    path = tmp_path / "edited.toml"
    path.write_text(_toml(data))
    return load_machine(path)


def test_every_figure_comes_from_the_file(tmp_path):
    base = simulate(M, dram_stream(M, 1024 * KB), launch_overhead=False)

    def halve_dram(d):
        d["dram"]["bw"] = d["dram"]["bw"] / 2
        d["dram"]["latency_ns"] = 0.0
        d["dma"]["setup_cycles"] = 0.0
    slow = _write_machine(tmp_path, halve_dram)
    fast_ref = dataclasses.replace(M, dram_latency_ns=0.0, dma_setup_cycles=0.0)
    ref = simulate(fast_ref, dram_stream(M, 1024 * KB), launch_overhead=False)
    halved = simulate(slow, dram_stream(M, 1024 * KB), launch_overhead=False)
    assert halved.kernel_cycles == pytest.approx(2 * ref.kernel_cycles, rel=0.01)
    assert base.kernel_cycles > ref.kernel_cycles

    def double_dpe(d):
        d["dpe"]["flops_per_cycle"]["fp16"] *= 2
        d["dpe"]["setup_cycles"] = 0.0
    fast = _write_machine(tmp_path, double_dpe)
    no_setup = dataclasses.replace(M, dpe_setup_cycles=0.0)
    mm = [matmul(256, 256, 256)]
    assert _one(mm, m=fast).commands[0].duration == pytest.approx(_one(mm, m=no_setup).commands[0].duration / 2)


def test_program_on_a_missing_pe_is_an_error():
    with pytest.raises(ValueError, match="runs on PE 64"):
        simulate(M, [program(64, [CoreEvent(1)])])
    with pytest.raises(ValueError, match="core 2"):
        simulate(M, [program(0, [CoreEvent(1)], core=2)])


def test_trace_without_end_event_ends_like_one():
    r = simulate(M, [program(0, [dma(4 * KB)], end=False)], launch_overhead=False)
    assert r.programs[0].end == pytest.approx(r.commands[0].end)


def test_unit_without_commands_is_rejected():
    bad = CommandEvent(op=Op.DMA_COPY, unit=Unit.CORE, subop=0, elements=1)
    with pytest.raises(ValueError, match="DMA, DPE, SIMD, RED or MLU"):
        simulate(M, [program(0, [bad])])


def test_dependency_through_the_other_core():
    """The scoreboard is per PE: core 1's compute waits for core 0's load into the same buffer."""
    load = [dma(64 * KB, local_addr=0), EndEvent()]
    use = [CoreEvent(10), CommandEvent(op=Op.SIMD_UNARY, unit=Unit.SIMD, subop=int(SimdOp.EXP), elements=4096,
                                       reads=[AddrRange(0, 16 * KB)], writes=[AddrRange(100 * KB, 116 * KB)])]
    r = simulate(M, [program(0, load, end=False), program(0, use, core=1)], launch_overhead=False)
    d, s = r.commands
    assert s.start == pytest.approx(d.end) and s.wait_dependency > 0


def test_fence_event_pc_is_ignored_by_timing():
    a = _one([dma(4 * KB), FenceEvent(UnitMask.DMA, pc=0x1234)])
    b = _one([dma(4 * KB), FenceEvent(UnitMask.DMA)])
    assert a.cycles == b.cycles


def test_atomics_cost_a_burst_per_element():
    n = 1024
    atomic = CommandEvent(op=Op.DMA_ATOMIC, unit=Unit.DMA, subop=0, elements=n, bytes_read={MemLevel.DRAM: 4 * n},
                          bytes_written={MemLevel.DRAM: 4 * n}, dtype_bytes=4)
    r = _one([atomic], launch_overhead=False).commands[0]
    fixed = M.dma_setup_cycles + M.dram_latency_cycles
    assert r.duration - fixed == pytest.approx(2 * n * M.dma_burst_bytes / M.dram_bytes_per_cycle)


@pytest.mark.parametrize("name", ["mtia-v1", "mtia-300"])
def test_other_machines_reach_their_peaks(name):
    m = load_machine(name)
    gemm = simulate(m, gemm_tiles(m, tile=128, steps=32), launch_overhead=False)
    assert 0.9 * m.peak_flops("fp16") <= gemm.counters.roofline.achieved_flops <= m.peak_flops("fp16") * (1 + 1e-9)
    # one DMA in flight per PE: enough bytes per command (double-buffered halves) hide the latency
    chunk = m.local_store_bytes // 2
    stream = simulate(m, dram_stream(m, 8 * chunk, chunk=chunk), launch_overhead=False)
    assert 0.9 * m.dram_bw <= stream.counters.bandwidth["dram"]["achieved_bw"] <= m.dram_bw * (1 + 1e-9)


M2 = dataclasses.replace(M, dma_max_in_flight=2)


def test_dma_in_flight_slots_hide_latency():
    loads = [dma(4 * KB, local_addr=0), dma(4 * KB, local_addr=64 * KB)]
    one = _one(loads, launch_overhead=False)
    two = _one(loads, m=M2, launch_overhead=False)
    a, b = two.commands
    assert b.start < a.end  # both in flight
    assert two.kernel_cycles < one.kernel_cycles - 0.8 * M.dram_latency_cycles
    dma_busy = two.counters.totals["DMA"].busy_cycles
    assert dma_busy == pytest.approx(max(a.end, b.end) - a.start)  # busy is the union, not the sum


def test_dma_in_flight_slots_respect_dependencies():
    same_buffer = [dma(4 * KB, local_addr=0), dma(4 * KB, local_addr=0)]  # WAW
    r = _one(same_buffer, m=M2, launch_overhead=False)
    assert r.commands[1].start == pytest.approx(r.commands[0].end)


def test_fence_waits_for_every_dma_in_flight():
    big_then_small = [dma(256 * KB, local_addr=0), dma(1 * KB, local_addr=300 * KB), fence(UnitMask.DMA),
                      CoreEvent(100)]
    r = _one(big_then_small, m=M2, launch_overhead=False)
    big, small = r.commands
    assert small.end < big.end  # completes out of order
    assert r.kernel_cycles == pytest.approx(big.end + 100 * M.core_cpi)


def test_hbm_machine_streams_with_several_dmas_in_flight():
    m = load_machine("mtia-300")
    assert m.dma_max_in_flight > 1
    evs = [dma(64 * KB, local_addr=(i % 4) * 64 * KB) for i in range(16)]
    r = simulate(m, [program(pe, evs) for pe in range(m.num_pes)], launch_overhead=False)
    assert 0.9 * m.dram_bw <= r.counters.bandwidth["dram"]["achieved_bw"] <= m.dram_bw * (1 + 1e-9)
    single = dataclasses.replace(m, dma_max_in_flight=1)
    r1 = simulate(single, [program(pe, evs) for pe in range(m.num_pes)], launch_overhead=False)
    assert r1.kernel_cycles > r.kernel_cycles
