"""The driver side of Triton backend `cpu`: the mtia driver, never the default one; plus the simulated
benchmarker Inductor's autotuner uses for CPU tensors (configs are picked by simulated time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lowering.backend.driver as _mtia

# launches made while Inductor benchmarks configs: not part of any user call
_autotune_launches: list[Any] = []
MAX_AUTOTUNE_RECORDS = 10_000


class InductorCpuDriver(_mtia.MtiaDriver):
    """What Inductor's `set_driver_to_cpu()` activates: launches go to the simulator like the mtia driver's.

    `is_active()` is False so that Triton's default driver stays the mtia one (Triton refuses two)."""

    def __init__(self) -> None:
        super().__init__()
        # activated by Inductor's kernels (torch is loaded): its NaN-propagating max/min helpers must be
        # the MTIA-friendly ones before those kernels compile (kegen.inductor.helpers)
        from kegen.inductor import helpers

        helpers.install()

    @classmethod
    def is_active(cls) -> bool:
        return False


def is_autotune_launch(record: Any) -> bool:
    """Whether a `launch_history()` record was made while Inductor benchmarked configs."""
    return any(record is r for r in _autotune_launches)


def simulated_cpu_benchmark(
    _self: Any, fn: Callable[[], Any], *, warmup: int = 0, rep: int = 0, **_: Any
) -> float:
    """Inductor benchmarker for device `cpu`: one call, timed as the simulated milliseconds of its
    launches (0 launches: the host wall clock of that call, e.g. an aten GEMM choice)."""
    import time

    start = len(_mtia.launch_history())
    t0 = time.perf_counter()
    fn()
    wall_ms = (time.perf_counter() - t0) * 1e3
    records = _mtia.launch_history()[start:]
    _autotune_launches.extend(records)
    del _autotune_launches[:-MAX_AUTOTUNE_RECORDS]
    if not records:
        return wall_ms
    return sum(float(r.result.seconds) for r in records) * 1e3
