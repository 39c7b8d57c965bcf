"""What makes `kegen eval` fast at large sizes without changing any answer: the timing memo keyed on
the full trace, chunked comparisons equal to the whole-tensor ones, zero-copy wire and launcher
paths, the arena overflow through `map_host`, and the evaluation's breakdown."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
import triton

from kegen.eval.config import EvalConfig
from kegen.eval.trusted import checker, checks, precision
from kegen.eval.trusted.breakdown import call_kind
from kegen.eval.wire import decode_values, encode_values, outputs_digest
from lowering.backend import driver, timing_memo
from lowering.backend.launch import same_bytes
from lowering.corpus.elementwise import vector_add as add_kernel


def _launch_add(n: int, block: int = 1024) -> tuple[torch.Tensor, Any]:
    x, y = torch.randn(n), torch.randn(n)
    z = torch.empty(n)
    add_kernel[(triton.cdiv(n, block),)](x, y, z, n, BLOCK=block)
    torch.testing.assert_close(z, x + y)
    return z, driver.last_launch()


@pytest.fixture
def fresh_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEGEN_MACHINE", "mtia-2i")
    monkeypatch.setattr(driver, "_session", None)


def test_timing_memo_hits_identical_launches_and_equals_a_fresh_replay(
    fresh_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing_memo, "WORTH", 0.0)  # digest whenever a launch was seen before
    _, first = _launch_add(4096)  # timed, kept undigested
    _, second = _launch_add(4096)  # same kernel, grid and addresses: both digested, a hit
    _, third = _launch_add(4096)
    stats = driver._session.stats  # type: ignore[union-attr]
    assert (stats.memo_misses, stats.memo_hits) == (0, 2)
    assert third.timing is second.timing is first.timing
    from mtia_sim.timing import simulate

    fresh = simulate(driver._session.sim.machine, third.traces)  # type: ignore[union-attr]
    assert fresh.cycles == third.cycles
    assert fresh.counters == third.counters
    _, other = _launch_add(8192)  # a different trace never hits
    _, again = _launch_add(8192)
    assert driver._session.stats.memo_hits == 3  # type: ignore[union-attr]
    assert other.cycles != third.cycles and again.timing is other.timing


def test_trace_digest_is_canonical_and_complete() -> None:
    from mtia_sim.events import AddrRange, CommandEvent, EndEvent, ProgramTrace
    from mtia_sim.isa import Op, Unit

    def trace(shared: bool, elements: int = 64) -> list[ProgramTrace]:
        r = AddrRange(0, 256)
        ev = CommandEvent(
            Op.DMA_COPY, Unit.DMA, 0, elements, reads=[r], writes=[r if shared else AddrRange(0, 256)]
        )
        return [ProgramTrace((0, 0, 0), 0, 0, [ev, EndEvent()])]

    assert timing_memo.trace_digest(trace(True), "cache") == timing_memo.trace_digest(trace(False), "cache")
    assert timing_memo.trace_digest(trace(True), "cache") != timing_memo.trace_digest(
        trace(True, 65), "cache"
    )
    assert timing_memo.trace_digest(trace(True), "cache") != timing_memo.trace_digest(trace(True), "off")


def test_storages_beyond_the_dram_arena_are_mapped(
    fresh_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEGEN_SIM_DRAM_ARENA_BYTES", str(1 << 16))  # 64 KiB: the tensors need 96 KiB
    z, res = _launch_add(8192)
    assert res.cycles > 0 and not driver._session.sim.memory.host_maps  # type: ignore[union-attr]


def _old_compare(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float) -> tuple[Any, ...]:
    """The whole-tensor comparison the chunked one replaced (reference for the test)."""
    r64, c64 = r.double().reshape(-1), c.double().reshape(-1)
    special = (torch.isnan(r64) != torch.isnan(c64)) | (torch.isinf(r64) != torch.isinf(c64))
    special |= torch.isinf(r64) & torch.isinf(c64) & (torch.sign(r64) != torch.sign(c64))
    if bool(special.any()):
        return (False, int(special.nonzero()[0]))
    finite = torch.isfinite(r64)
    diff = torch.where(finite, (c64 - r64).abs(), torch.zeros_like(r64))
    excess = torch.where(finite, diff - (atol + rtol * r64.abs()), torch.full_like(r64, -math.inf))
    rel = torch.where(finite, diff / r64.abs().clamp_min(atol), torch.zeros_like(r64))
    ok = float(excess.max()) <= 0
    worst = int(diff.argmax()) if ok else int(excess.argmax())
    return (ok, worst, float(diff.max()), float(rel.max()), int((excess > 0).sum()))


@pytest.mark.parametrize("case", ["ok", "off", "nan", "ties", "inf", "equal"])
def test_chunked_comparison_equals_the_whole_tensor_one(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checker, "CHUNK", 7)  # many chunk boundaries
    g = torch.Generator().manual_seed(3)
    r = torch.randn(5, 11, generator=g)
    c = r + 1e-6 * torch.randn(5, 11, generator=g)
    if case == "off":
        c[1, 3] += 0.5
        c[4, 10] -= 0.25
    elif case == "nan":
        c[3, 2] = float("nan")
    elif case == "ties":
        c = r.clone()
        c[0, 8] += 0.125
        c[2, 1] += 0.125
        c[4, 4] += 0.125
    elif case == "inf":
        r[2, 2] = c[2, 2] = float("inf")
    elif case == "equal":
        r[1, 1] = float("nan")
        c = r.clone()
    cfg = EvalConfig()
    got = checker.compare_outputs([r], [c], cfg)
    old = _old_compare(r, c, 1e-4, 1e-4)
    flat = got.worst_index[0] * 11 + got.worst_index[1]  # type: ignore[index]
    if case == "nan":
        assert not got.ok and flat == old[1] and "NaN/Inf" in got.message
        return
    assert (got.ok, flat, got.max_abs_error, got.max_rel_error) == old[:4]
    if not got.ok:
        assert f"{old[4]} of 55 elements out of tolerance" in got.message


def test_chunked_precision_check_flags_half_precision_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "_CHUNK", 50)
    ref = torch.randn(1000)
    assert checks.check_precision([ref], [ref.clone()]) is None
    low = ref.half().float()
    msg = checks.check_precision([ref], [low])
    assert msg and "float16" in msg
    assert checks.check_precision([low], [low.clone()]) is None  # the reference is low precision too


def test_wire_hands_over_received_bytes_but_never_aliases_two_values() -> None:
    metas, blobs = encode_values([torch.arange(4.0)])
    received = [bytearray(memoryview(blobs[0]).cast("B"))]
    twice = decode_values([metas[0], metas[0]], received)
    twice[0][0] = 42.0
    assert float(twice[1][0]) == 0.0 and float(twice[0][0]) == 42.0
    assert outputs_digest([torch.ones(3)]) != outputs_digest([torch.ones(3).double()])
    assert outputs_digest([torch.ones(3)]) == outputs_digest([torch.ones(3)])


def test_same_bytes_and_call_kinds() -> None:
    a = np.arange(100, dtype=np.uint8)
    assert same_bytes(a, bytes(a)) and not same_bytes(a, a[:-1])
    b = a.copy()
    b[-1] ^= 1
    assert not same_bytes(a, b, chunk=16)
    assert [
        call_kind(w) for w in ("candidate forward (trial 2)", "precision trial", "candidate forward (timed)")
    ] == [
        "trial",
        "precision",
        "timed",
    ]
    assert replace(EvalConfig(), trials=2).trials == 2


def test_one_thread_restores_the_thread_count_once_after_nested_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checker, "FEW_THREADS", 1 << 20)  # act whatever this machine's thread count
    before = torch.get_num_threads()
    with checker.one_thread():
        with checker.one_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_the_evaluators_own_work_is_given_back_to_the_deadline_at_most_timeout_s(tmp_path: Any) -> None:
    from types import SimpleNamespace

    from kegen.eval.trusted.evaluator import Evaluator

    ev = Evaluator(tmp_path / "p.py", tmp_path / "c.py", None, EvalConfig(timeout_s=10.0), "eval")
    session: Any = SimpleNamespace(deadline=100.0)
    start = ev.deadline
    for seconds in (4.0, -1.0, 5.0, 3.0):
        ev._credit(session, seconds)
    assert session.deadline == 110.0 and ev.deadline == start + 10.0


def test_the_device_runs_launches_on_its_own_memory_and_refuses_bad_requests(fresh_session: None) -> None:
    from kegen.eval.trusted.device import MtiaDevice

    n = 2048
    x, y = torch.randn(n), torch.randn(n)
    compiled = add_kernel[(2,)](x, y, torch.zeros(n), n, BLOCK=1024)
    fn, arg_types = compiled.function, list(compiled.metadata.mtia_arg_types)
    dev = MtiaDevice("mtia-2i")
    dev.open(1 << 24)
    mx, my = dev.memory.place(x), dev.memory.place(y)
    dev.begin_call()
    ops = {"op": "device_ops", "ops": [{"op": "alloc", "h": 1, "nbytes": 4 * n}]}
    assert dev.handle(ops, []) is None  # memory operations get no reply
    header = {
        "op": "launch",
        "name": fn.name,
        "grid": [2, 1, 1],
        "arg_types": arg_types,
        "slots": [["dptr", mx["dev"], 0], ["dptr", my["dev"], 0], ["dptr", 1, 0], ["scalar", n]],
    }
    served = dev.handle(header, [bytearray(fn.elf)])
    assert served is not None and served[0]["op"] == "launched" and served[1] == []  # no bytes come back
    out = {"dev": 1, "offset": 0, "shape": [n], "strides": [1], "dtype": "float32"}
    assert torch.equal(dev.memory.read(out), x + y)
    call = dev.end_call()
    assert len(call.launches) == 1 and call.seconds == call.launch_seconds > 0
    for slots, fragment in (
        ([["dptr", 99, 0]] + header["slots"][1:], "does not exist"),
        ([["dptr", mx["dev"], 10**9]] + header["slots"][1:], "outside its storage"),
        ([["exec", "rm -rf /"]] + header["slots"][1:], "unknown slot"),
        (header["slots"][:2], "one slot per argument"),
    ):
        dev.begin_call()
        served = dev.handle(dict(header, slots=slots), [bytearray(fn.elf)])
        assert served is not None and served[0]["op"] == "error" and fragment in served[0]["error"]
        dev.end_call()
    dev.close()
    with pytest.raises(ValueError, match="does not exist"):
        dev.memory.read(out)  # a new session starts with an empty memory


def test_device_charges_uploads_copies_and_fills_in_a_call() -> None:
    from kegen.eval.trusted.device import MtiaDevice

    dev = MtiaDevice("mtia-2i")
    dev.open(1 << 20)
    m = dev.description
    dev.begin_call()
    view = {"dev": 1, "offset": 0, "shape": [256], "strides": [1], "dtype": "float32"}
    ops = [
        {"op": "alloc", "h": 1, "nbytes": 1024},
        {"op": "alloc", "h": 2, "nbytes": 1024},
        {"op": "upload", "dst": view, "blob": 0},
        {"op": "copy", "dst": dict(view, dev=2), "src": view},
        {"op": "fill", "dst": view, "value": "-inf"},
    ]
    blob = bytearray(torch.arange(256, dtype=torch.float32).numpy().tobytes())
    assert dev.handle({"op": "device_ops", "ops": ops}, [blob]) is None
    call = dev.end_call()
    assert not call.errors and [t.kind for t in call.transfers] == ["upload", "copy", "fill"]
    assert call.transfers[0].seconds == pytest.approx(m.host_link_latency_ns * 1e-9 + 1024 / m.host_link_bw)
    assert call.transfers[1].seconds == pytest.approx(m.launch_overhead_ns * 1e-9 + 2048 / m.dram_bw)
    assert torch.equal(dev.memory.read(dict(view, dev=2)), torch.arange(256, dtype=torch.float32))
    assert torch.isneginf(dev.memory.read(view)).all()
    dev.begin_call()
    assert dev.handle({"op": "device_ops", "ops": [{"op": "upload", "dst": view, "blob": 0}]}, [b"x"]) is None
    assert "upload of 1 bytes" in dev.end_call().errors[0]
