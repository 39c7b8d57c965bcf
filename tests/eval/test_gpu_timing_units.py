"""GPU timing and device plumbing that can be checked without a GPU (fakes for CUDA events; the
meta device standing in for cuda)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kegen.eval import timing_gpu
from kegen.eval.inputs import InputFactory, default_device
from kegen.eval.loader import Problem
from kegen.eval.models import build_model


class FakeEvent:
    log: list[str] = []
    clock = 0.0

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        FakeEvent.clock += 1.0
        self.t = FakeEvent.clock
        FakeEvent.log.append("event")

    def elapsed_time(self, other: FakeEvent) -> float:
        return (other.t - self.t) * 1e3  # ms, like CUDA's


class FakeFlush:
    def zero_(self) -> None:
        FakeEvent.log.append("flush")


def _fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeEvent.log, FakeEvent.clock = [], 0.0
    monkeypatch.setattr(timing_gpu, "_Event", FakeEvent)
    monkeypatch.setattr(timing_gpu, "_synchronize", lambda: FakeEvent.log.append("sync"))
    monkeypatch.setattr(timing_gpu, "_flush_buffer", FakeFlush)
    monkeypatch.setattr(timing_gpu, "_sleep", lambda cycles: FakeEvent.log.append(f"spin {cycles}"))


def test_timed_calls_end_when_forward_returns_not_after_the_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch)

    def model(x: int) -> int:
        FakeEvent.log.append("forward")
        return x * 2

    def guarded(fwd: Any, inputs: list[Any]) -> Any:
        out = fwd(*inputs)
        FakeEvent.log.append("guard checks")  # the guards' sync, thread and stream checks
        FakeEvent.clock += 100.0  # slow host work after the forward must not be timed
        return out

    samples, outs = timing_gpu.time_calls(guarded, model, [[1], [2]])
    assert outs == [2, 4]
    assert samples == pytest.approx([1.0, 1.0])  # start -> end only
    # an untimed warm call sizes the spin; then flush, spin (hides the host's launch overhead, as
    # the baselines' timing does), start, forward, end, and only then the guards' checks
    assert FakeEvent.log[:4] == ["flush", "sync", "forward", "guard checks"]
    timed = FakeEvent.log[5:]
    assert timed[0] == "flush" and timed[1].startswith("spin ") and int(timed[1].split()[1]) > 0
    assert timed[2:7] == ["event", "forward", "event", "guard checks", "sync"]


def test_host_bound_forward_is_charged_its_host_time(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch)
    clock = [0.0]
    monkeypatch.setattr(timing_gpu, "_perf_counter", lambda: clock[0])

    def model(x: int) -> int:
        clock[0] += 5e-3  # 5 ms of host work per forward, far beyond its GPU time (1 us here)
        return x

    def guarded(fwd: Any, inputs: list[Any]) -> Any:
        return fwd(*inputs)

    monkeypatch.setattr(FakeEvent, "elapsed_time", lambda self, other: 1e-3)  # 1 us on the GPU
    samples, _ = timing_gpu.time_calls(guarded, model, [[1], [2], [3]])
    assert samples == pytest.approx([5e-3] * 3)


PROBLEM_SRC = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(4)  # no device: the mtia convention

    def forward(self, x):
        return x * self.scale

def get_inputs():
    return [torch.randn(2, 4)]

def get_init_inputs():
    return []
"""


def _problem(tmp_path: Any, src: str) -> Problem:
    from kegen.eval.loader import load_problem

    path = tmp_path / "problem.py"
    path.write_text(src)
    return load_problem(path)


def test_host_convention_problems_land_on_the_evaluation_device(tmp_path: Any) -> None:
    problem = _problem(tmp_path, PROBLEM_SRC)
    factory = InputFactory(problem, "meta")  # stands in for cuda: no GPU needed
    (x,) = factory.make(7)
    assert x.device.type == "meta" and x.shape == (2, 4)
    model = build_model(problem.model_cls, [], 0, "meta")
    assert model.scale.device.type == "meta"
    with default_device("cpu"):
        assert torch.empty(1).device.type == "cpu"


def test_inputs_fall_back_to_the_host_when_get_inputs_needs_it(tmp_path: Any) -> None:
    src = PROBLEM_SRC.replace(
        "return [torch.randn(2, 4)]", "return [torch.from_numpy(torch.randn(2, 4).numpy())]"
    )
    factory = InputFactory(_problem(tmp_path, src), "meta")
    a, b = factory.make(3)[0], factory.make(3)[0]
    assert a.device.type == "meta" and a.shape == (2, 4) and b.shape == (2, 4)
    host = InputFactory(_problem(tmp_path, src), "cpu")
    assert torch.equal(host.make(3)[0], host.make(3)[0])  # seeded either way
