"""The Triton driver of target `mtia`: runs `kernel[grid](cpu_tensors...)` on the simulator.

Active only on a machine without a CUDA or ROCm GPU. The launcher copies the CPU tensors'
storages into simulator DRAM (straight from the tensors' memory; a storage too big for the DRAM
arena is mapped with `Simulator.map_host` instead), launches the linked image over the grid, and
copies back the storages the launch changed. The simulated time of a launch whose trace equals an
earlier one's comes from a memo (`lowering.backend.timing_memo`).

Public API for callers that read simulated time (the evaluation team):

    from lowering.backend import driver
    driver.clear_launch_history()
    kernel[grid](...)
    res = driver.last_launch()          # mtia_sim LaunchResult: .cycles, .seconds, .counters
    driver.launch_history()             # every LaunchRecord since the last clear
    driver.enable_launch_history(False) # keep only the most recent launch

Under `kegen eval` the launcher sends each launch to the evaluator's out-of-process device
(`lowering.backend.device_client`); the history here then holds what the device told this process,
which the evaluator never reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from lowering.backend.options import default_machine, machine_arch
from lowering.compat import DriverUtilsCompat

if TYPE_CHECKING:  # the simulator is imported at the first launch, not by `import triton`
    from lowering.backend.launch import LaunchRecord, SimulatorSession

# the default machine's target; get_current_target() follows KEGEN_MACHINE
TARGET = GPUTarget("mtia", "2i", 1)


def current_target() -> GPUTarget:
    """The target of the current machine (`default_machine()`: KEGEN_MACHINE, else mtia-2i)."""
    arch = machine_arch(default_machine())
    return TARGET if arch == TARGET.arch else GPUTarget("mtia", arch, 1)


_history: list[LaunchRecord] = []
_history_lock = threading.Lock()
_session: SimulatorSession | None = None
_keep_all = True
MAX_HISTORY = 10_000


def _get_session(machine: str) -> SimulatorSession:
    from lowering.backend.launch import SimulatorSession

    global _session
    if _session is None or _session.machine != machine:
        _session = SimulatorSession(machine)
    return _session


def last_launch() -> Any:
    """The `LaunchResult` (cycles, seconds, counters) of the most recent launch in this process."""
    with _history_lock:
        if not _history:
            raise LookupError("no mtia kernel has been launched in this process yet")
        return _history[-1].result


def launch_history() -> list[LaunchRecord]:
    """Every launch since the last `clear_launch_history()` (kernel name, grid, result)."""
    with _history_lock:
        return list(_history)


def clear_launch_history() -> None:
    """Forget every recorded launch."""
    with _history_lock:
        _history.clear()


def enable_launch_history(enabled: bool = True) -> None:
    """Keep every launch (default) or only the most recent one (for long benchmark loops)."""
    global _keep_all
    _keep_all = enabled


def _record(rec: LaunchRecord) -> None:
    with _history_lock:
        if not _keep_all:
            _history.clear()
        _history.append(rec)
        if len(_history) > MAX_HISTORY:
            del _history[: len(_history) - MAX_HISTORY]


class MtiaLauncher:
    """Callable Triton invokes for each launch:
    (gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook, *args)."""

    def __init__(self, src: Any, metadata: Any) -> None:
        self.name: str = metadata.name
        self.arg_types: list[str] = list(metadata.mtia_arg_types)
        signature = dict(getattr(src, "signature", {}) or {})
        self.arg_positions: list[int] = [i for i, ty in enumerate(signature.values()) if ty != "constexpr"]
        if len(self.arg_positions) != len(self.arg_types):
            raise RuntimeError(
                f"kernel {self.name}: the signature has {len(self.arg_positions)} runtime arguments but the "
                f"compiled kernel takes {len(self.arg_types)}"
            )
        self.machine: str = metadata.machine
        self.dual_core: bool = bool(metadata.dual_core)
        self.blocked: bool = getattr(metadata, "mtia_pe_mapping", "round_robin") == "blocked"
        self.sram_mode: str = getattr(metadata, "sram_mode", "cache")
        self.tags: tuple[str, ...] = tuple(getattr(metadata, "mtia_tags", ()) or ())

    def __call__(
        self,
        gx: int,
        gy: int,
        gz: int,
        stream: Any,
        function: Any,
        packed_metadata: Any,
        launch_metadata: Any,
        enter_hook: Callable[..., Any] | None,
        exit_hook: Callable[..., Any] | None,
        *args: Any,
    ) -> None:
        if enter_hook is not None:
            enter_hook(launch_metadata)
        from lowering.backend.device_client import remote_device
        from lowering.backend.launch import LaunchRecord

        runtime_args = [args[i] for i in self.arg_positions]
        device: Any = remote_device()  # under `kegen eval`: the evaluator's out-of-process device
        extra: dict[str, Any] = {"tags": self.tags} if device is not None else {}  # source lines for profiles
        if device is None:
            device = _get_session(self.machine)
        result = device.launch(
            function,
            (gx, gy, gz),
            runtime_args,
            self.arg_types,
            dual_core=self.dual_core,
            blocked=self.blocked,
            sram_mode=self.sram_mode,
            **extra,
        )
        _record(LaunchRecord(kernel=self.name, grid=(gx, gy, gz), result=result, tags=self.tags))
        if exit_hook is not None:
            exit_hook(launch_metadata)


@dataclass
class _Function:
    """What `load_binary` returns as the 'function' handle: the kernel's name and ELF bytes."""

    name: str
    elf: bytes


class MtiaUtils(DriverUtilsCompat):
    """Device utilities Triton's runtime calls (`driver.active.utils`; those only some Triton releases
    call come from `lowering.compat.DriverUtilsCompat`)."""

    def get_device_properties(self, device: Any) -> dict[str, int]:
        """The current machine's (KEGEN_MACHINE's) properties in Triton's CUDA-style names: local store
        per PE as shared memory, PEs as multiprocessors, clock in kHz, DRAM channels as bus width."""
        from mtia_sim.machine import load_machine

        m = load_machine(default_machine())
        return {
            "max_shared_mem": int(m.local_store_bytes),
            "multiprocessor_count": int(m.num_pes),
            "max_num_regs": 1 << 20,
            "warpSize": 1,
            "sm_clock_rate": int(m.clock_hz // 1000),
            "mem_clock_rate": 0,
            "mem_bus_width": int(m.dram_channels),
        }

    def load_binary(
        self, name: str, kernel: bytes, shared: int, device: Any
    ) -> tuple[Any, Any, int, int, int]:
        fn = _Function(name, bytes(kernel))
        return (fn, fn, 0, 0, 1 << 30)


def _simulated_benchmarker(
    kernel_call: Callable[[], Any],
    *,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
    **kwargs: Any,
) -> Any:
    """Triton-style benchmarker reporting *simulated* milliseconds of the kernel's launches."""
    clear_before = len(launch_history())
    kernel_call()
    recs = launch_history()[clear_before:]
    ms = sum(float(r.result.seconds) for r in recs) * 1e3
    if quantiles is not None:
        return [ms for _ in quantiles]
    return ms


class MtiaDriver(DriverBase):
    """Driver of the simulated MTIA chip (CPU torch tensors in, CPU torch tensors out)."""

    def __init__(self) -> None:
        super().__init__()
        self.utils = MtiaUtils()
        self.launcher_cls = MtiaLauncher

    @classmethod
    def is_active(cls) -> bool:
        try:
            import torch
        except ImportError:
            return True
        return not torch.cuda.is_available() and getattr(torch.version, "hip", None) is None

    def map_python_to_cpp_type(self, ty: str) -> str:
        return "uint64_t" if ty.startswith("*") else {"fp32": "float", "fp64": "double"}.get(ty, "int64_t")

    def get_current_target(self) -> GPUTarget:
        return current_target()

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cpu

    def get_benchmarker(self) -> Callable[..., Any]:
        return _simulated_benchmarker

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(16, dtype=torch.int8)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()
