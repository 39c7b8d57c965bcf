"""The simulator's timing step is a constructor argument: a hook sees exactly what the timing model
would, its answer is the launch's timing, and the memo (lowering.backend.timing_memo) is such a hook
whose answers equal a fresh replay's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lowering.backend import timing_memo
from lowering.backend.timing_memo import TimingMemo
from mtia_sim import Simulator
from mtia_sim.machine import load_machine
from mtia_sim.simulator import replay_timing
from mtia_sim.timing import simulate
from tests.sim.test_programs import BLOCK, vector_add_kernel

N = 4 * BLOCK


def _launch(sim: Simulator, n: int = N) -> Any:
    image = sim.load_image(vector_add_kernel(), entry="kernel")
    x = np.arange(n, dtype=np.float32)
    xa, ya, oa = sim.to_device(x), sim.to_device(2 * x), sim.to_device(np.zeros(n, np.float32))
    res = sim.launch(image, (-(-n // BLOCK),), [xa, ya, oa, n])
    np.testing.assert_array_equal(sim.from_device(oa, (n,), np.float32), 3 * x)
    return res, image


def test_a_hook_sees_the_launch_and_its_answer_is_the_timing() -> None:
    calls: list[tuple[Any, ...]] = []

    def hook(machine: Any, traces: list[Any], sram_mode: str, image: Any) -> Any:
        calls.append((machine, traces, sram_mode, image))
        return replay_timing(machine, traces, sram_mode, image)

    sim = Simulator("mtia-2i", dram_arena_bytes=16 << 20, timing=hook)
    res, image = _launch(sim)
    (machine, traces, sram_mode, seen), = calls
    assert machine is sim.machine and seen is image and sram_mode == "cache"
    assert traces == res.traces
    plain = Simulator("mtia-2i", dram_arena_bytes=16 << 20)
    assert _launch(plain)[0].cycles == res.cycles == simulate(sim.machine, res.traces).cycles


def test_a_hook_may_answer_none_and_a_bad_hook_is_refused() -> None:
    sim = Simulator("mtia-2i", dram_arena_bytes=16 << 20, timing=lambda *a: None)
    res, _ = _launch(sim)
    assert res.timing is None and res.programs == N // BLOCK
    with pytest.raises(RuntimeError, match="timing model"):
        _ = res.cycles
    with pytest.raises(TypeError, match="TimingStep"):
        Simulator("mtia-2i", timing=42)  # type: ignore[arg-type]


def test_the_memo_hook_hits_repeats_and_equals_a_fresh_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing_memo, "WORTH", 0.0)  # digest whenever a launch was seen before
    base_calls = []

    def base(machine: Any, traces: list[Any], sram_mode: str, image: Any) -> Any:
        base_calls.append(len(traces))
        return replay_timing(machine, traces, sram_mode, image)

    memo = TimingMemo(base)
    sim = Simulator("mtia-2i", dram_arena_bytes=16 << 20, timing=memo)
    image = sim.load_image(vector_add_kernel(), entry="kernel")
    x = np.arange(N, dtype=np.float32)
    xa, ya, oa = sim.to_device(x), sim.to_device(x), sim.to_device(x)
    first, second, third = (sim.launch(image, (N // BLOCK,), [xa, ya, oa, N]) for _ in range(3))
    assert len(base_calls) == 1 and (memo.stats.memo_hits, memo.stats.memo_misses) == (2, 0)
    assert third.timing is second.timing is first.timing
    fresh = simulate(sim.machine, third.traces)
    assert fresh.cycles == third.cycles and fresh.counters == third.counters
    other = sim.launch(image, (N // BLOCK - 1,), [xa, ya, oa, N - BLOCK])  # another trace: replayed
    assert len(base_calls) == 2 and other.cycles != third.cycles
    with pytest.raises(ValueError, match="one machine"):
        memo(load_machine("mtia-300"), third.traces, "cache", image)
