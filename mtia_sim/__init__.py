"""mtia_sim: a cycle-approximate simulator of an MTIA-style 8×8-PE accelerator, built on Unicorn.

The public names are loaded on first use, so `import mtia_sim.isa` (the command encoding) or
`mtia_sim.machine` does not pay for Unicorn and numpy-heavy modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mtia_sim.errors import (
        CoreTrapError,
        DeviceAssertError,
        IllegalCommandError,
        LinkError,
        LocalStoreOverflowError,
        MemoryFaultError,
        MisalignedDescriptorError,
        RunawayError,
        SimulationError,
    )
    from mtia_sim.loader import Image
    from mtia_sim.machine import load_machine
    from mtia_sim.simulator import LaunchResult, Simulator

_EXPORTS = {
    "CoreTrapError": "mtia_sim.errors",
    "DeviceAssertError": "mtia_sim.errors",
    "IllegalCommandError": "mtia_sim.errors",
    "LinkError": "mtia_sim.errors",
    "LocalStoreOverflowError": "mtia_sim.errors",
    "MemoryFaultError": "mtia_sim.errors",
    "MisalignedDescriptorError": "mtia_sim.errors",
    "RunawayError": "mtia_sim.errors",
    "SimulationError": "mtia_sim.errors",
    "Image": "mtia_sim.loader",
    "load_machine": "mtia_sim.machine",
    "LaunchResult": "mtia_sim.simulator",
    "Simulator": "mtia_sim.simulator",
}

__all__ = [
    "CoreTrapError", "DeviceAssertError", "IllegalCommandError", "Image", "LaunchResult", "LinkError",
    "LocalStoreOverflowError", "MemoryFaultError", "MisalignedDescriptorError", "RunawayError",
    "SimulationError", "Simulator", "load_machine",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mtia_sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
