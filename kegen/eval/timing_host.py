"""Target `cpu`: host wall-clock timing (development and tests; not a performance target)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kegen.eval.config import EvalConfig
from kegen.eval.timing import Timing, TimingStats

_perf_counter = time.perf_counter  # bound before any candidate is imported


def measure(call: Callable[[list[Any]], Any], input_sets: list[list[Any]], config: EvalConfig) -> Timing:
    """Warm up, then time calls round-robin over fresh input sets until rep_ms (at least timing_runs)."""
    out: Any = None
    for i in range(2):
        out = call(input_sets[i % len(input_sets)])
    samples: list[float] = []
    budget = config.rep_ms * 1e-3
    spent, i = 0.0, 0
    while (len(samples) < config.timing_runs or spent < budget) and len(samples) < 1000:
        inputs = input_sets[i % len(input_sets)]
        t0 = _perf_counter()
        out = call(inputs)
        dt = _perf_counter() - t0
        samples.append(dt)
        spent += dt
        i += 1
    return Timing(
        TimingStats.from_samples(samples, "host wall clock (perf_counter)"), out, (i - 1) % len(input_sets)
    )
