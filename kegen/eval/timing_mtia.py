"""Target `mtia`: is the lowering backend usable here (`backend_status`)?

Simulated time itself is measured by the evaluator's own device (`kegen.eval.trusted.device`): the sum
over a call's launches of the simulator's cycles at the machine's clock, launch overhead included.
"""

from __future__ import annotations

from typing import Any

from kegen.eval.errors import TargetUnavailable


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
