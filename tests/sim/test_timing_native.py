"""The native timing replay gives the Python replay's answer (mtia_sim.timing.native vs engine).

Differential tests on random hand-built traces (every event kind, every SRAM mode, several machines)
and on edge cases; real kegen-lowered kernels are in test_timing_native_e2e.py.
"""

from __future__ import annotations

import math
import random
import warnings
from typing import Any

import pytest

from mtia_sim import isa
from mtia_sim.events import CommandEvent, CoreEvent, EndEvent, Event, MemLevel, MemSpan, ProgramTrace
from mtia_sim.isa import Op, Unit
from mtia_sim.machine import MachineDescription, load_machine
from mtia_sim.timing import TimingResult, native, simulate
from mtia_sim.timing.native import loader
from mtia_sim.timing.synthetic import (
    dma,
    dram_stream,
    fence,
    gemm_tiles,
    matmul,
    program,
    random_traces,
    scalar,
)

REL = 1e-9

if loader.load() is None:
    pytest.skip("native timing replay unavailable here (no C compiler or Python headers)",
                allow_module_level=True)


def _close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), f"{where}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, f"{where}: {a} != {b}"
        if math.isinf(a) or math.isinf(b):
            assert a == b, f"{where}: {a} != {b}"
        else:
            assert math.isclose(a, b, rel_tol=REL, abs_tol=1e-9), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _command_row(c: Any) -> dict[str, Any]:
    routed = None if c.routed is None else (dict(c.routed.read), dict(c.routed.written), c.routed.sram_fill,
                                            c.routed.fill_id, sorted(c.routed.waits), c.routed.fill_lines)
    return {"pe": c.pe, "core": c.core, "program": c.program, "event": id(c.event), "issue": c.issue,
            "start": c.start, "end": c.end, "wait_unit": c.wait_unit, "wait_dependency": c.wait_dependency,
            "wait_bandwidth": c.wait_bandwidth, "ideal": c.ideal_cycles, "slot": c.slot, "routed": routed}


def _program_row(p: Any) -> dict[str, Any]:
    return {"program": p.program, "id": p.program_id, "pe": p.pe, "core": p.core, "start": p.start, "end": p.end,
            "instructions": p.instructions, "busy": p.busy_cycles, "stalls": p.stalls,
            "mem_accesses": p.mem_accesses, "mem_bytes": p.mem_bytes}


def assert_same(py: TimingResult, nat: TimingResult) -> None:
    """Everything a TimingResult holds agrees to ~1e-9 relative."""
    _close(py.cycles, nat.cycles, "cycles")
    assert py.events_processed == nat.events_processed
    _close([_command_row(c) for c in py.commands], [_command_row(c) for c in nat.commands], "commands")
    _close([_program_row(p) for p in py.programs], [_program_row(p) for p in nat.programs], "programs")
    _close(py.counters.to_dict(), nat.counters.to_dict(), "counters")
    _close(list(map(list, py.bandwidth_timeline)), list(map(list, nat.bandwidth_timeline)), "timeline")
    assert py.sram_cache is not None and nat.sram_cache is not None
    _close(py.sram_cache.to_dict(), nat.sram_cache.to_dict(), "sram_cache")


def compare(m: MachineDescription, traces: list[ProgramTrace], **kw: Any) -> TimingResult:
    py = simulate(m, traces, use_native=False, **kw)
    assert native.replay(m, traces, sram_mode=kw.get("sram_mode", "cache"),
                         sram_cache_bytes=kw.get("sram_cache_bytes")) is not None, "native replay refused"
    nat = simulate(m, traces, **kw)
    assert_same(py, nat)
    return nat


@pytest.mark.parametrize("machine", ["mtia-v1", "mtia-2i", "mtia-300"])
@pytest.mark.parametrize("mode", ["cache", "resident", "off"])
def test_random_traces(machine: str, mode: str) -> None:
    m = load_machine(machine)
    for seed in range(3):
        traces = random_traces(random.Random(seed * 7 + len(mode)), m, programs=16, commands=14)
        compare(m, traces, sram_mode=mode)


def test_small_cache_evicts_and_merges() -> None:
    """A cache of a few lines: batched LRU eviction, merged misses on fills in flight."""
    m = load_machine("mtia-2i")
    traces = []
    for pe in range(8):
        evs: list[Event] = []
        for i in range(24):
            addr = isa.DRAM_BASE + ((i * 4096 + pe * 1024) % (48 * 1024))
            evs += [CoreEvent(3), dma(4096, local_addr=(i % 4) * 4096, mem_addr=addr)]
            if i % 5 == 4:
                evs.append(dma(2048, src=MemLevel.LOCAL, dst=MemLevel.DRAM, local_addr=0, mem_addr=addr + 512))
        traces.append(program(pe, evs))
    for cap in (0, 4096, 16 * 1024, 1 << 20):
        for mode in ("cache", "resident"):
            r = compare(m, traces, sram_mode=mode, sram_cache_bytes=cap)
            assert r.sram_cache is not None
    assert compare(m, traces, sram_cache_bytes=16 * 1024).sram_cache.evicted_lines > 0  # type: ignore[union-attr]


def _strided(addr: int, rows: int, row_bytes: int, stride: int) -> CommandEvent:
    ev = dma(rows * row_bytes, local_addr=0)
    ev.spans = [MemSpan(MemLevel.DRAM, False, addr, row_bytes, (rows,), (stride,))]
    return ev


def test_spans_of_every_shape() -> None:
    """Strided, multi-dim, gathered (starts) and misaligned spans; reads and writes in one command."""
    import numpy as np
    m = load_machine("mtia-2i")
    base = isa.DRAM_BASE
    gather = dma(64 * 32, local_addr=0)
    gather.spans = [MemSpan(MemLevel.DRAM, False, 0, 32, starts=np.arange(64, dtype=np.int64)[::-1] * 200 + base)]
    multi = dma(4 * 8 * 64, local_addr=8192)
    multi.spans = [MemSpan(MemLevel.DRAM, False, base + 100, 64, (4, 8), (8192, 300))]
    both = dma(4096, src=MemLevel.DRAM, dst=MemLevel.DRAM, local_addr=0)
    both.spans = [MemSpan(MemLevel.DRAM, False, base, 4096), MemSpan(MemLevel.DRAM, True, base + 2048, 4096)]
    evs: list[Event] = [gather, multi, both, _strided(base + 64, 16, 200, 512), _strided(base, 16, 256, 128), fence()]
    traces = [program(pe, evs * 3, core=pe % 2) for pe in range(4)]
    for mode in ("cache", "resident", "off"):
        compare(m, traces, sram_mode=mode)


def test_cores_queues_fences_and_scalar_access() -> None:
    """Several cores per PE sharing full queues, fences on unit subsets, scalar DRAM/SRAM accesses."""
    m = load_machine("mtia-2i")
    evs: list[Event] = []
    for i in range(30):
        evs += [scalar(5, MemLevel.DRAM if i % 3 else MemLevel.SRAM, accesses=i % 4), matmul(32, 32, 32, a=i * 64),
                dma(1024, local_addr=(i % 3) * 1024)]
        if i % 7 == 0:
            evs.append(fence(isa.UnitMask.DMA))
    traces = [program(pe % 2, evs, core=pe % m.cores_per_pe, program_id=(pe, 0, 0)) for pe in range(8)]
    compare(m, traces)
    compare(m, traces, launch="replacement")
    compare(m, traces, launch_overhead=False)


def test_remote_and_cross_pe_accumulate() -> None:
    m = load_machine("mtia-2i")
    acc = CommandEvent(op=Op.RED_ACCUMULATE, unit=Unit.RED, subop=0, elements=256, flops=256,
                       bytes_read={MemLevel.LOCAL: 1024, MemLevel.REMOTE_LOCAL: 1024},
                       bytes_written={MemLevel.REMOTE_LOCAL: 1024}, remote_pe=0)
    atomic = dma(512, src=MemLevel.LOCAL, dst=MemLevel.DRAM, local_addr=0)
    atomic.op = Op.DMA_ATOMIC
    traces = [program(pe, [CoreEvent(10), acc, atomic, dma(2048, src=MemLevel.REMOTE_LOCAL, remote_pe=(pe + 1) % 4),
                           fence()]) for pe in range(4)]
    compare(m, traces)


def test_benchmark_shapes_and_empty() -> None:
    m = load_machine("mtia-2i")
    compare(m, dram_stream(m, 256 * 1024, chunk=16 * 1024, pes=16))
    compare(m, gemm_tiles(m, tile=64, steps=8, pes=8))
    compare(m, [])
    compare(m, [ProgramTrace((0, 0, 0), 0, 0, [CoreEvent(5)])])  # no EndEvent


def test_refuses_what_it_does_not_take_and_python_decides() -> None:
    """Unusual records go to the Python replay, which handles them or raises its own error."""
    m = load_machine("mtia-2i")

    class OddCore(CoreEvent):
        pass

    odd = [program(0, [OddCore(7), dma(1024)])]
    assert native.replay(m, odd) is None
    assert simulate(m, odd).cycles == simulate(m, odd, use_native=False).cycles
    bad_level = [program(0, [CoreEvent(3, mem_accesses=(("local", 2, 8),)), EndEvent()])]
    assert native.replay(m, bad_level) is None
    with pytest.raises(ValueError, match="scalar accesses"):
        simulate(m, bad_level)
    off_grid = [ProgramTrace((0, 0, 0), m.num_pes, 0, [EndEvent()])]
    with pytest.raises(ValueError, match="runs on PE"):
        simulate(m, off_grid)


def test_switch_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    m = load_machine("mtia-2i")
    traces = dram_stream(m, 64 * 1024, pes=2)
    monkeypatch.setenv("KEGEN_SIM_NATIVE", "0")
    assert native.replay(m, traces) is None
    monkeypatch.setenv("KEGEN_SIM_NATIVE", "1")
    assert native.replay(m, traces) is not None


def test_without_compiler_warns_once_and_uses_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(loader, "_warned", False)
    loader._load.cache_clear()
    monkeypatch.setenv("CC", "no-such-compiler-kegen")
    monkeypatch.setenv("KEGEN_CACHE_DIR", str(tmp_path))
    m = load_machine("mtia-2i")
    traces = dram_stream(m, 64 * 1024, pes=2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r1 = simulate(m, traces)
        r2 = simulate(m, traces)
    loader._load.cache_clear()
    assert sum("native timing replay unavailable" in str(w.message) for w in seen) == 1
    assert r1.cycles == r2.cycles == simulate(m, traces, use_native=False).cycles


def test_odd_spans_are_refused_or_equal() -> None:
    """Spans the port does not take go to Python; strided views of starts are taken as they are."""
    import numpy as np
    m = load_machine("mtia-2i")
    base = isa.DRAM_BASE

    def launch(span: MemSpan) -> list[ProgramTrace]:
        ev = dma(4096, local_addr=0)
        ev.spans = [span]
        return [program(0, [ev, dma(1024, mem_addr=base)])]

    reversed_view = np.arange(0, 64 * 256, 256, dtype=np.int64)[::-1] + base  # a negative-stride view
    compare(m, launch(MemSpan(MemLevel.DRAM, False, 0, 64, starts=reversed_view)))
    compare(m, launch(MemSpan(MemLevel.DRAM, False, 0, 64, starts=(np.arange(128, dtype=np.int64) * 64 + base)[::2])))
    refused = [MemSpan(MemLevel.DRAM, False, base, 64, (-2, -3), (128, 4096)),  # negative counts
               MemSpan(MemLevel.DRAM, False, base, 0),  # empty rows
               MemSpan(MemLevel.DRAM, False, 0, 64, starts=[base, base + 4096]),  # a list, not an array
               MemSpan(MemLevel.DRAM, False, 0, 64, starts=np.array([4096], dtype=np.int32))]
    for span in refused:
        traces = launch(span)
        assert native.replay(m, traces) is None
        assert_same(simulate(m, traces, use_native=False), simulate(m, traces))
