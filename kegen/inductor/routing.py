"""torch.compile onto the simulated MTIA: Inductor's Triton kernels for CPU tensors run on `mtia_sim`.

    import kegen.inductor
    compiled = kegen.inductor.compile(model, machine="mtia-2i")
    out = compiled(x)                      # every Inductor kernel ran on the simulator
    compiled.last_run.kernels              # per-kernel launch records (cycles, seconds, counters)
    compiled.last_run.host_ops             # ops Inductor left to aten on the host (by name)

Or, for plain `torch.compile`: `kegen.inductor.enable()` once, then `torch.compile(model)(cpu_tensors)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kegen import compat
from kegen.inductor import helpers

BACKEND_NAME = "cpu"
# Inductor settings for MTIA: Triton for CPU tensors, compile in this process (workers would not
# see a run-time registration), GEMM/conv templates in Triton where Inductor has them
INDUCTOR_CONFIG: dict[str, Any] = {
    "cpu_backend": "triton",
    "compile_threads": 1,
    # variances in two plain reductions: the mtia reduction engine has no Welford combine function
    "mtia.disable_welford_reduction": True,
    "fx_graph_cache": False,  # a cached graph would skip the hook that moves GEMMs/convs to the device
    "layout_optimization": False,  # no channels-last copies around convolutions
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

    Sets Inductor's config (INDUCTOR_CONFIG), registers Triton backend `cpu`, installs the
    MTIA-friendly helper functions (kegen.inductor.helpers), picks autotuning configs by simulated
    time, and runs the GEMMs/convolutions Inductor leaves to aten as kegen's Triton kernels. Needs a
    machine without a CUDA/ROCm GPU (the mtia driver is active only there)."""
    from lowering.backend.driver import MtiaDriver

    if not MtiaDriver.is_active():
        raise RuntimeError("kegen.inductor needs a machine without a CUDA/ROCm GPU (the mtia driver is off)")
    register_backend()
    helpers.install()
    install_benchmarker()
    _hook_compiled_modules()
    compat.set_inductor_options(INDUCTOR_CONFIG)  # options this torch lacks: emulated or dropped


def install_benchmarker() -> None:
    """Inductor's autotuning times CPU-device choices by their simulated time
    (`simulated_cpu_benchmark`; how it is installed depends on the torch release: kegen.compat)."""
    from kegen.inductor.backend.driver import simulated_cpu_benchmark

    compat.install_cpu_benchmarker(simulated_cpu_benchmark, _benchmark_cpu)


def _benchmark_cpu(self: Any, fn: Callable[[], Any], warmup: int = 0, rep: int = 0, **kw: Any) -> float:
    """`Benchmarker.benchmark_cpu`'s signature (warmup/rep may come positionally) over the simulator."""
    from kegen.inductor.backend.driver import simulated_cpu_benchmark

    return simulated_cpu_benchmark(self, fn, warmup=warmup, rep=rep, **kw)


def restore_default_driver() -> None:
    """Make Triton's default (mtia) driver the active one again: Inductor's kernel modules activate
    the `cpu` backend's driver when they load, and code that checks for the mtia driver (kegen.eval)
    would otherwise see another. Launches behave the same under either."""
    from triton.runtime import driver

    driver.reset_active()


@contextmanager
def machine_env(machine: str | None) -> Iterator[None]:
    """`machine` as the process's machine inside the block (nothing changes for None)."""
    from lowering.backend.options import machine_scope

    with machine_scope(machine):
        yield


def host_ops(code: str, lowered: bool = True) -> list[str]:
    """Library calls Inductor's output code makes on the host (e.g. `aten.avg_pool3d`), sorted; with
    `lowered`, the extern GEMMs/convolutions kegen runs on the device are left out."""
    from kegen.inductor.extern_kernels import REPLACEMENTS

    calls = "\n".join(line.split("#", 1)[0] for line in code.splitlines())
    found = {m.group(1) for m in _HOST_CALL.finditer(calls)} - _HOST_BOOKKEEPING
    return sorted(found - set(REPLACEMENTS) if lowered else found)


class DeviceExternKernels:
    """Stands in for Inductor's `extern_kernels` in compiled modules: GEMMs and convolutions run as
    kegen's Triton kernels (kegen.inductor.extern_kernels) on the device; anything else is
    Inductor's host call (and is reported by `host_ops`)."""

    def __init__(self, host: Any) -> None:
        self._host = host

    def __getattr__(self, name: str) -> Any:
        from kegen.inductor import extern_kernels as ek

        replacement = ek.REPLACEMENTS.get(f"extern_kernels.{name}")
        if replacement is None:
            return getattr(self._host, name)
        if name == "convolution":
            return _convolution_like_aten
        return getattr(ek, replacement)


def _convolution_like_aten(x: Any, weight: Any, bias: Any, *args: Any, **kwargs: Any) -> Any:
    """kegen_convolution with the output layout aten would give (Inductor's code asserts it)."""
    import torch

    from kegen.inductor.extern_kernels import kegen_convolution

    meta = torch.ops.aten.convolution(
        x.to("meta"), weight.to("meta"), None if bias is None else bias.to("meta"), *args, **kwargs
    )
    conv: Any = kegen_convolution  # called with aten's positional/keyword mix
    return conv(x, weight, bias, *args, **kwargs, out_size=tuple(meta.shape), out_stride=meta.stride())


_hooked = False


def _hook_compiled_modules() -> None:
    """Give every module Inductor compiles a DeviceExternKernels (once per process)."""
    global _hooked
    if _hooked:
        return
    from torch._inductor.graph import GraphLowering

    original = GraphLowering.compile_to_module

    def compile_to_module(self: Any) -> Any:
        module: Any = original(self)
        host = getattr(module, "extern_kernels", None)
        if host is not None and not isinstance(host, DeviceExternKernels):
            module.extern_kernels = DeviceExternKernels(host)
        return module

    GraphLowering.compile_to_module = compile_to_module  # type: ignore[method-assign,assignment]
    _hooked = True


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
            try:
                if not self.code:  # the first call compiles: keep Inductor's output code
                    out, self.code = run_and_get_code(self.compiled, *args, **kwargs)
                else:
                    out = self.compiled(*args, **kwargs)
            finally:
                restore_default_driver()
            records = driver.launch_history()[start:]
        self.last_run = CompiledRun(kernel_runs(records), host_ops("\n".join(self.code)))
        return out


def compile(model: Callable[..., Any], machine: str | None = None, **compile_kwargs: Any) -> CompiledModel:  # noqa: A001
    """`torch.compile(model)` whose Triton kernels run on the simulated MTIA `machine` (default:
    KEGEN_MACHINE, else mtia-2i); `.last_run` holds per-kernel records and the host-side ops."""
    return CompiledModel(model, machine, **compile_kwargs)
