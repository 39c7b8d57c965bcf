"""mtia_sim: a cycle-approximate simulator of an MTIA-style 8×8-PE accelerator, built on Unicorn."""

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

__all__ = [
    "CoreTrapError", "DeviceAssertError", "IllegalCommandError", "Image", "LaunchResult", "LinkError",
    "LocalStoreOverflowError", "MemoryFaultError", "MisalignedDescriptorError", "RunawayError",
    "SimulationError", "Simulator", "load_machine",
]
