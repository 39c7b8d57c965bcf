"""Where an evaluation's time went (`details.breakdown`): calls by kind, the evaluator's own work
per step, and what the simulated device did (launches, memory operations, bytes moved, functional
and timing seconds, timing memo hits). Measurements only: nothing here decides a verdict."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kegen.eval.trusted.device import MtiaDevice


class Breakdown:
    """Counters of one evaluation (the device's are the difference of two snapshots)."""

    def __init__(self, device: MtiaDevice | None) -> None:
        self.device = device
        self._start = device.snapshot() if device is not None else None
        self.calls: Counter[str] = Counter()
        self.spent: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def spend(self, step: str) -> Iterator[None]:
        """Add the wall time of the block to `step`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.spent[step] += time.perf_counter() - t0

    def candidate_s(self) -> float:
        """Seconds so far that the candidate is charged for: its worker's calls (the device serving
        its launches included)."""
        return self.spent["worker_calls"]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": dict(self.calls),
            "evaluator_s": {k: round(v, 3) for k, v in sorted(self.spent.items())},
        }
        if self.device is not None and self._start is not None:
            out["device"] = _minus(self.device.snapshot(), self._start)
        return out


def _minus(now: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in now.items():
        if isinstance(value, dict):
            out[key] = _minus(value, then.get(key) or {})
        elif isinstance(value, int | float):
            diff = value - (then.get(key) or 0)
            out[key] = round(diff, 3) if isinstance(diff, float) else diff
    return out


def call_kind(what: str) -> str:
    """trial / precision / edge / timed, from a verified call's description."""
    for key, kind in (
        ("(trial", "trial"),
        ("precision", "precision"),
        ("(sizes", "edge"),
        ("(timed", "timed"),
    ):
        if key in what:
            return kind
    return "other"
