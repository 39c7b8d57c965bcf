"""torch.compile onto the simulated MTIA: Inductor's Triton kernels for CPU tensors run on `mtia_sim`.

    import kegen.inductor
    compiled = kegen.inductor.compile(model, machine="mtia-2i")
    out = compiled(x)                      # every Inductor kernel ran on the simulator
    compiled.last_run.kernels              # per-kernel launch records (cycles, seconds, counters)
    compiled.last_run.host_ops             # ops Inductor left to aten on the host (by name)

Or, for plain `torch.compile`: `kegen.inductor.enable()` once, then `torch.compile(model)(cpu_tensors)`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kegen.inductor import helpers

BACKEND_NAME = "cpu"
# Inductor settings for MTIA: Triton for CPU tensors, compile in this process (workers would not
# see a run-time registration), GEMM/conv templates in Triton where Inductor has them
INDUCTOR_CONFIG: dict[str, Any] = {
    "cpu_backend": "triton",
    "compile_threads": 1,
}
# a call the output code makes to a library kernel on the host (not a Triton launch)
_HOST_CALL = re.compile(r"\b(extern_kernels\.\w+|aten\.\w+(?:\.\w+)?|torch\.ops\.\w+\.\w+(?:\.\w+)?)\s*\(")
_HOST_BOOKKEEPING = {"aten.empty_strided", "aten.empty", "aten.as_strided", "aten.reinterpret_tensor"}


def register_backend() -> None:
    """Register Triton backend `cpu` (kegen.inductor.backend) unless the entry point already did."""
    import triton.backends as tb

    from kegen.inductor.backend.compiler import InductorCpuBackend
    from kegen.inductor.backend.driver import InductorCpuDriver

    current = tb.backends.get(BACKEND_NAME)
    if current is not None and current.compiler is InductorCpuBackend:
        return
    if current is not None:
        raise RuntimeError(
            f"Triton already has a backend named {BACKEND_NAME!r} ({current.compiler.__module__}); "
            "uninstall it (e.g. triton-cpu) to run Inductor's CPU kernels on the simulated MTIA"
        )
    tb.backends[BACKEND_NAME] = tb.Backend(compiler=InductorCpuBackend, driver=InductorCpuDriver)


def enable() -> None:
    """Route torch.compile's CPU kernels through Inductor's Triton code generation onto mtia_sim.

    Sets Inductor's config (INDUCTOR_CONFIG), registers Triton backend `cpu`, and installs the
    MTIA-friendly helper functions (kegen.inductor.helpers). Needs a machine without a CUDA/ROCm GPU
    (the mtia driver is active only there)."""
    import torch._inductor.config as inductor_config

    from lowering.backend.driver import MtiaDriver

    if not MtiaDriver.is_active():
        raise RuntimeError("kegen.inductor needs a machine without a CUDA/ROCm GPU (the mtia driver is off)")
    from torch._inductor.runtime.benchmarking import register_benchmarker

    from kegen.inductor.backend.driver import simulated_cpu_benchmark

    register_backend()
    helpers.install()
    register_benchmarker("cpu", simulated_cpu_benchmark, override=True)
    for key, value in INDUCTOR_CONFIG.items():
        setattr(inductor_config, key, value)


@contextmanager
def machine_env(machine: str | None) -> Iterator[None]:
    """KEGEN_MACHINE set to `machine` inside the block (nothing changes for None)."""
    if machine is None:
        yield
        return
    old = os.environ.get("KEGEN_MACHINE")
    os.environ["KEGEN_MACHINE"] = machine
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("KEGEN_MACHINE", None)
        else:
            os.environ["KEGEN_MACHINE"] = old


def host_ops(code: str) -> list[str]:
    """Library calls Inductor's output code makes on the host (e.g. `extern_kernels.mm`), sorted."""
    return sorted({m.group(1) for m in _HOST_CALL.finditer(code)} - _HOST_BOOKKEEPING)


@dataclass
class KernelRun:
    """One kernel launch on the simulator."""

    kernel: str
    grid: tuple[int, int, int]
    cycles: float
    seconds: float
    counters: Any = None


@dataclass
class CompiledRun:
    """What one call of a compiled model did on the simulated chip (and what it left on the host)."""

    kernels: list[KernelRun] = field(default_factory=list)
    host_ops: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Simulated device time: the sum of the launches' times (host ops are not included)."""
        return sum(k.seconds for k in self.kernels)

    @property
    def cycles(self) -> float:
        return sum(k.cycles for k in self.kernels)


def kernel_runs(records: list[Any]) -> list[KernelRun]:
    """KernelRun of each `lowering.backend.driver` launch record, leaving out autotuning launches."""
    from kegen.inductor.backend.driver import is_autotune_launch

    return [
        KernelRun(r.kernel, tuple(r.grid), float(r.result.cycles), float(r.result.seconds), r.result.counters)
        for r in records
        if not is_autotune_launch(r)
    ]


class CompiledModel:
    """A torch.compile'd callable whose calls run on the simulated MTIA and record what they did."""

    def __init__(self, fn: Callable[..., Any], machine: str | None, **compile_kwargs: Any) -> None:
        import torch

        enable()
        self.machine = machine
        self.original = fn
        self.compiled = torch.compile(fn, **compile_kwargs)
        self.code: list[str] = []
        self.last_run: CompiledRun | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch._inductor.utils import run_and_get_code

        from lowering.backend import driver

        with machine_env(self.machine):
            start = len(driver.launch_history())
            if not self.code:  # the first call compiles: keep Inductor's output code
                out, self.code = run_and_get_code(self.compiled, *args, **kwargs)
            else:
                out = self.compiled(*args, **kwargs)
            records = driver.launch_history()[start:]
        self.last_run = CompiledRun(kernel_runs(records), host_ops("\n".join(self.code)))
        return out


def compile(model: Callable[..., Any], machine: str | None = None, **compile_kwargs: Any) -> CompiledModel:  # noqa: A001
    """`torch.compile(model)` whose Triton kernels run on the simulated MTIA `machine` (default:
    KEGEN_MACHINE, else mtia-2i); `.last_run` holds per-kernel records and the host-side ops."""
    return CompiledModel(model, machine, **compile_kwargs)
