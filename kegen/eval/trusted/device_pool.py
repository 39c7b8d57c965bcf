"""The evaluator's simulated devices: one per machine and thread (simulators are not shareable
between concurrent evaluations)."""

from __future__ import annotations

import threading

from kegen.eval.trusted.device import MtiaDevice

_local = threading.local()


def device_for(machine: str) -> MtiaDevice:
    """This thread's device for `machine` (built on first use: the machine comes from EvalConfig)."""
    devices: dict[str, MtiaDevice] = getattr(_local, "devices", None) or {}
    _local.devices = devices
    dev = devices.get(machine)
    if dev is None:
        dev = devices[machine] = MtiaDevice(machine)
    return dev
