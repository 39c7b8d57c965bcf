"""Timing of the memory system: scalar core accesses and the SRAM as a memory-side cache."""

from __future__ import annotations

import numpy as np
import pytest

from mtia_sim import isa
from mtia_sim.events import CoreEvent, MemLevel, MemSpan
from mtia_sim.machine import load_machine
from mtia_sim.timing import simulate
from mtia_sim.timing.sram_cache import SramCache, span_lines
from mtia_sim.timing.synthetic import dma, fence, program, scalar

M = load_machine("mtia-2i")
KB = 1024
BASE = isa.DRAM_BASE


def _run(traces, **kw):
    return simulate(M, traces, launch_overhead=False, **kw)


# ---- scalar loads and stores -----------------------------------------------------------------
def test_scalar_accesses_pay_latency_and_count_bytes():
    n = 1000
    r = _run([program(0, [scalar(50, MemLevel.DRAM, n)])])
    prog = r.programs[0]
    assert prog.stalls["scalar_mem"] >= n * M.dram_latency_cycles
    assert r.kernel_cycles >= 50 * M.core_cpi + n * M.dram_latency_cycles
    assert r.counters.totals["CORE"].bytes_read == {"dram": 4 * n}
    assert r.counters.roofline.dram_bytes == 4 * n
    assert r.counters.bandwidth["dram"]["bytes"] == 4 * n
    sram = _run([program(0, [scalar(50, MemLevel.SRAM, n)])])
    assert sram.kernel_cycles < r.kernel_cycles  # SRAM is closer


def test_scalar_copy_loop_is_slower_than_dma_copy_of_the_same_bytes():
    nbytes = 64 * KB
    words = nbytes // 4
    # a copy loop: 4 instructions per word, a load and a store per word
    loop = _run([program(0, [CoreEvent(4 * words, mem_accesses=(("dram", 2 * words, 2 * nbytes),))])])
    dmas = _run([program(0, [dma(nbytes), fence(), dma(nbytes, src=MemLevel.LOCAL, dst=MemLevel.DRAM)])])
    assert loop.kernel_cycles > 10 * dmas.kernel_cycles
    assert loop.counters.roofline.dram_bytes == dmas.counters.roofline.dram_bytes == 2 * nbytes


def test_scalar_accesses_share_dram_bandwidth():
    # every PE streams 1 MiB with 64-byte scalar accesses: bounded by the chip's DRAM bandwidth
    per_pe, size = 1 << 20, 64
    traces = [program(pe, [scalar(10, MemLevel.DRAM, per_pe // size, per_pe)]) for pe in range(M.num_pes)]
    r = _run(traces)
    achieved = r.counters.bandwidth["dram"]["achieved_bw"]
    assert achieved <= M.dram_bw * (1 + 1e-9)
    assert r.kernel_cycles >= M.num_pes * per_pe / M.dram_bytes_per_cycle


def test_small_scalar_accesses_move_a_burst_each():
    n = 20_000
    traces = [program(pe, [scalar(0, MemLevel.DRAM, n, n)]) for pe in range(M.num_pes)]  # 1-byte loads
    r = _run(traces)
    bursts = M.num_pes * n * M.dma_burst_bytes / M.dram_bytes_per_cycle
    assert r.kernel_cycles >= bursts
    assert r.counters.roofline.dram_bytes == M.num_pes * n  # counted bytes are the bytes asked for


def test_scalar_accesses_to_an_unknown_level_are_rejected():
    with pytest.raises(ValueError, match="'dram' or 'sram'"):
        _run([program(0, [CoreEvent(5, mem_accesses=(("local", 3, 12),))])])


# ---- the SRAM as a memory-side cache -----------------------------------------------------------
def _load_twice(nbytes: int = 64 * KB, **kw):
    evs = [dma(nbytes, mem_addr=BASE), fence(), dma(nbytes, local_addr=nbytes, mem_addr=BASE)]
    return _run([program(0, evs)], **kw)


def test_rereads_hit_the_sram_cache():
    r = _load_twice()
    first, second = r.commands
    assert first.bytes_read == {MemLevel.DRAM: 64 * KB}
    assert second.bytes_read == {MemLevel.SRAM: 64 * KB}
    assert second.duration < first.duration
    c = r.counters
    assert c.bandwidth["dram"]["bytes"] == 64 * KB and c.bandwidth["sram"]["bytes"] == 64 * KB
    assert c.sram_cache["hit_lines"] == c.sram_cache["miss_lines"] == 64 * KB // M.sram_line_bytes
    assert c.sram_cache["hit_rate"] == pytest.approx(0.5)
    assert r.sram_cache is not None and r.sram_cache.mode == "cache"


def test_cache_off_and_resident_modes():
    off = _load_twice(sram_mode="off")
    assert off.counters.bandwidth["dram"]["bytes"] == 2 * 64 * KB
    assert off.counters.bandwidth["sram"]["bytes"] == 0
    resident = _load_twice(sram_mode="resident")
    assert resident.counters.bandwidth["dram"]["bytes"] == 0
    assert resident.counters.bandwidth["sram"]["bytes"] == 2 * 64 * KB
    assert resident.kernel_cycles < _load_twice().kernel_cycles < off.kernel_cycles
    with pytest.raises(ValueError, match="sram_mode must be one of"):
        _load_twice(sram_mode="scratch")


def test_resident_mode_spills_to_dram_beyond_capacity():
    r = _load_twice(sram_mode="resident", sram_cache_bytes=16 * KB)
    assert r.counters.bandwidth["dram"]["bytes"] > 0


def test_lru_capacity_evicts_old_lines():
    a, b = BASE, BASE + (1 << 20)
    evs = [dma(32 * KB, mem_addr=a), fence(), dma(32 * KB, mem_addr=b), fence(), dma(32 * KB, mem_addr=a)]
    fits = _run([program(0, evs)], sram_cache_bytes=64 * KB)
    assert fits.commands[2].bytes_read == {MemLevel.SRAM: 32 * KB}
    small = _run([program(0, evs)], sram_cache_bytes=32 * KB)  # b evicts a
    assert small.commands[2].bytes_read == {MemLevel.DRAM: 32 * KB}
    assert small.counters.sram_cache["evicted_lines"] > 0


def test_concurrent_misses_on_the_same_lines_merge():
    evs = [dma(16 * KB, mem_addr=BASE)]
    r = _run([program(pe, evs) for pe in range(4)])
    assert r.counters.bandwidth["dram"]["bytes"] == 16 * KB  # one fill from DRAM
    filler = next(c for c in r.commands if MemLevel.DRAM in c.bytes_read)
    merged = [c for c in r.commands if c is not filler]
    assert all(c.bytes_read == {MemLevel.SRAM: 16 * KB} for c in merged)
    assert all(c.end >= filler.end for c in merged)  # they wait for the data


@pytest.mark.parametrize("use_native", [True, False])
def test_misaligned_reads_pay_every_line_they_fill(use_native: bool) -> None:
    """Rows that straddle cache lines: each miss fills a whole line from DRAM, so reads split across
    commands never move fewer DRAM bytes than the lines they touch (charging each command only its
    share of a line let a misaligned GEMM run faster than its DRAM roofline)."""
    line = M.sram_line_bytes
    rows = 16
    evs = []
    for i in range(rows):  # consecutive `line`-byte reads starting half a line in: each covers 2 lines
        evs += [dma(line, local_addr=i * line, mem_addr=BASE + line // 2 + i * line), fence()]
    r = _run([program(0, evs)], use_native=use_native)
    assert r.counters.bandwidth["dram"]["bytes"] == (rows + 1) * line  # every line touched, once
    assert r.commands[0].bytes_read == {MemLevel.DRAM: 2 * line}
    assert all(c.bytes_read[MemLevel.DRAM] == line for c in r.commands[1:])
    aligned = _run([program(0, [dma(line, local_addr=i * line, mem_addr=BASE + i * line)
                                for i in range(rows)])], use_native=use_native)
    assert aligned.counters.bandwidth["dram"]["bytes"] == rows * line


def test_writes_go_through_to_dram_and_allocate():
    n = 32 * KB
    evs = [dma(n, src=MemLevel.LOCAL, dst=MemLevel.DRAM, mem_addr=BASE), fence(),
           dma(n, local_addr=64 * KB, mem_addr=BASE)]
    r = _run([program(0, evs)])
    assert r.commands[0].bytes_written == {MemLevel.DRAM: n}
    assert r.commands[1].bytes_read == {MemLevel.SRAM: n}
    resident = _run([program(0, evs)], sram_mode="resident")
    assert resident.counters.bandwidth["dram"]["bytes"] == 0


def test_commands_without_spans_bypass_the_cache():
    evs = [dma(16 * KB), fence(), dma(16 * KB)]
    r = _run([program(0, evs)])
    assert r.counters.bandwidth["dram"]["bytes"] == 32 * KB
    assert r.counters.sram_cache["hit_lines"] == 0


def test_span_lines_of_strided_rows():
    # 4 rows of 64 bytes, 1 KiB apart: each row within one 128-byte line
    span = MemSpan(MemLevel.DRAM, False, BASE, 64, (4,), (1024,))
    lines = span_lines([span], 128)
    assert lines.tolist() == [(BASE + i * 1024) // 128 for i in range(4)]
    # an unaligned row crossing a line boundary covers two lines
    crossing = MemSpan(MemLevel.DRAM, False, BASE + 100, 64)
    assert span_lines([crossing], 128).size == 2
    gather = MemSpan(MemLevel.DRAM, False, 0, 4, starts=np.array([BASE, BASE + 4, BASE + 4096]))
    assert span_lines([gather], 128).size == 2


def test_strided_span_merges_contiguous_dims():
    # a [8, 16] fp16 tile of a row-major matrix with 256 columns
    span = MemSpan.strided(MemLevel.DRAM, False, BASE, (1, 1, 8, 16), [0, 0, 256, 1], 2)
    assert (span.row_bytes, span.counts, span.strides) == (32, (8,), (512,))
    contiguous = MemSpan.strided(MemLevel.DRAM, False, BASE, (1, 1, 8, 256), [0, 0, 256, 1], 2)
    assert (contiguous.row_bytes, contiguous.counts) == (8 * 256 * 2, ())
    backwards = MemSpan.strided(MemLevel.DRAM, False, BASE + 30, (1, 1, 1, 16), [0, 0, 0, -1], 2)
    assert backwards.base == BASE and backwards.row_bytes == 32


def test_cache_state_is_per_launch():
    first = _load_twice()
    again = _load_twice()
    assert again.counters.sram_cache == first.counters.sram_cache  # cold at every launch


def test_cache_rejects_bad_configuration():
    with pytest.raises(ValueError, match="capacity >= 0"):
        SramCache("cache", -1, 128)


@pytest.mark.parametrize("use_native", [True, False])
def test_resident_placement_is_charged_at_dram_bandwidth(use_native: bool) -> None:
    """Resident mode is not a free resource: the lines a launch reads were copied in from DRAM
    before it and the lines it writes are written back after it; both are charged in the launch."""
    n = 32 * KB
    evs = [dma(n, mem_addr=BASE), fence(), dma(n, src=MemLevel.LOCAL, dst=MemLevel.DRAM, mem_addr=BASE + (1 << 20))]
    resident = _run([program(0, evs)], sram_mode="resident", use_native=use_native)
    cache = _run([program(0, evs)], use_native=use_native)
    stats = resident.sram_cache
    assert stats is not None and stats.placement_bytes == 2 * n
    assert (stats.placed_read_lines, stats.placed_write_lines) == (n // 128, n // 128)
    m = resident.machine
    placement = 2 * n / m.dram_bytes_per_cycle
    assert resident.launch_cycles == pytest.approx(cache.launch_cycles + placement)
    # what the launch moves to or from DRAM takes at least DRAM time, resident or not
    assert resident.cycles >= 2 * n / m.dram_bytes_per_cycle
    assert cache.sram_cache is not None and cache.sram_cache.placement_bytes == 0
