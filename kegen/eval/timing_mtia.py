"""Target `mtia`: simulated time of a forward = the sum over its kernel launches of the simulator's
cycles at the machine's clock, launch overhead included (LaunchResult.seconds).

The only module that knows the lowering driver's launch-history API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kegen.eval.config import EvalConfig
from kegen.eval.errors import CandidateError, TargetUnavailable
from kegen.eval.timing import Timing, TimingStats


def driver_module() -> Any:
    """lowering.backend.driver, or TargetUnavailable saying why not."""
    try:
        import triton.backends  # noqa: F401  (Triton discovers the backend first; importing the driver

        # module before Triton would re-enter Triton's discovery half-initialised)
        from lowering.backend import driver
    except Exception as exc:  # an unfinished backend can fail in many ways
        raise TargetUnavailable(
            f"target mtia needs the lowering backend, which failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    for name in ("clear_launch_history", "launch_history"):
        if not hasattr(driver, name):
            raise TargetUnavailable(f"lowering.backend.driver lacks {name}(); cannot read simulated time")
    return driver


def backend_status() -> str | None:
    """None if `kernel[grid](cpu_tensors)` runs on the simulated MTIA here, else the reason it does not."""
    try:
        driver = driver_module()
        from triton.runtime import driver as rt

        active = type(rt.active).__module__
        if not active.startswith("lowering"):
            return f"Triton's active driver is {active}, not the mtia driver"
        del driver
    except Exception as exc:
        return str(exc)
    return None


def launch_seconds(record: Any) -> float:
    result = record.result
    seconds = getattr(result, "seconds", None)
    if seconds is None:
        raise TargetUnavailable("mtia LaunchResult has no .seconds")
    return float(seconds)


def measure(
    call: Callable[[list[Any]], Any],
    input_sets: list[list[Any]],
    config: EvalConfig,
    expected_launches: Callable[[], int] | None = None,
) -> Timing:
    """Simulated seconds per forward over `timing_runs` calls on fresh inputs (the model is exact, so
    the spread reflects data-dependent work only)."""
    driver = driver_module()
    samples: list[float] = []
    out: Any = None
    launches: list[Any] = []
    runs = max(1, config.timing_runs)
    for i in range(runs):
        driver.clear_launch_history()
        before = expected_launches() if expected_launches else None
        out = call(input_sets[i % len(input_sets)])
        launches = driver.launch_history()
        if not launches:
            raise CandidateError(
                "runtime_error",
                "no mtia kernel launch was recorded during forward: a "
                "candidate must launch @triton.jit kernels on CPU tensors",
            )
        if before is not None and expected_launches is not None:
            made = expected_launches() - before
            if len(launches) < made:
                raise CandidateError(
                    "cheat_detected",
                    f"the launch history holds {len(launches)} launches but "
                    f"the candidate made {made}: it tampered with the simulator's record",
                )
        samples.append(sum(launch_seconds(r) for r in launches))
    return Timing(
        TimingStats.from_samples(
            samples, "simulated (mtia_sim cycles at the machine clock, launch overhead included)"
        ),
        out,
        (runs - 1) % len(input_sets),
        launches=list(launches),
    )
