"""The compiler side of Triton backend `cpu`: kegen's mtia compiler, retargeted from `cpu` to the machine."""

from __future__ import annotations

from triton.backends.compiler import GPUTarget

import lowering.backend.compiler as _mtia
from lowering.backend.driver import current_target

CPU_BACKEND = "cpu"


class InductorCpuBackend(_mtia.MtiaBackend):
    """Compiles Inductor's `cpu`-target Triton kernels for the simulated MTIA (the current machine)."""

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == CPU_BACKEND

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        # Inductor names target `cpu`; the machine (and the cache key) is the current mtia one
        self.target = current_target()
