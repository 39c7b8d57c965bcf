"""Moving CPU torch tensors through the simulator for one launch (used by the driver)."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Any

from mtia_sim import isa


@dataclass
class LaunchRecord:
    """One kernel launch: the kernel's name, the grid, and the simulator's LaunchResult."""

    kernel: str
    grid: tuple[int, int, int]
    result: Any
    tags: tuple[str, ...] = ()  # command tag N is tags[N - 1]: "<ttir op> <file:line:col>" (profiles)


def _storage_span(t: Any) -> tuple[int, int]:
    """(host address, byte size) of the storage behind tensor `t`."""
    st = t.untyped_storage()
    return int(st.data_ptr()), int(st.nbytes())


def scalar_slot(value: Any, ty: str) -> int:
    """A runtime scalar as its 64-bit ABI slot: ints sign-extended, floats as float64 bits."""
    if ty.startswith("fp") or ty in ("bf16", "f16", "f32", "f64"):
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(value) & 0xFFFF_FFFF_FFFF_FFFF


class SimulatorSession:
    """One simulator per process and machine; images cached by ELF bytes."""

    def __init__(self, machine: str) -> None:
        from mtia_sim.simulator import Simulator

        self.machine = machine
        self.sim = Simulator(machine=machine)
        self._images: dict[bytes, Any] = {}

    def image(self, fn: Any) -> Any:
        img = self._images.get(fn.elf)
        if img is None:
            img = self.sim.load_image(fn.elf, entry=fn.name)
            self._images[fn.elf] = img
        return img

    def launch(
        self,
        fn: Any,
        grid: tuple[int, int, int],
        args: list[Any],
        arg_types: list[str],
        *,
        dual_core: bool = False,
        blocked: bool = False,
    ) -> Any:
        """Copy tensor storages in, launch, copy them back; return the LaunchResult."""
        image = self.image(fn)
        self.sim.reset_memory() if hasattr(self.sim, "reset_memory") else None
        storages: dict[int, tuple[int, int, int]] = {}  # host base -> (host base, nbytes, device base)
        slots: list[int] = []
        for value, ty in zip(args, arg_types, strict=True):
            if ty.startswith("*"):
                if value is None:
                    slots.append(0)
                    continue
                if not hasattr(value, "untyped_storage"):
                    raise TypeError(
                        f"pointer argument of type {ty} must be a torch tensor, got {type(value)}"
                    )
                if value.device.type != "cpu":
                    raise ValueError(f"mtia kernels take CPU tensors; got a tensor on {value.device}")
                host, nbytes = _storage_span(value)
                if host not in storages:
                    dev = self.sim.alloc(max(nbytes, isa.ALIGNMENT), align=isa.ALIGNMENT)
                    self.sim.write(dev, ctypes.string_at(host, nbytes) if nbytes else b"")
                    storages[host] = (host, nbytes, dev)
                slots.append(storages[host][2] + (int(value.data_ptr()) - host))
            else:
                slots.append(scalar_slot(value, ty))
        from lowering.passes.pe_mapping import PEMapping

        plan = PEMapping("blocked" if blocked else "round_robin", dual_core).plan(
            grid, self.sim.num_pes, self.sim.cores_per_pe
        )
        slots += list(plan.extra_slots)
        grid = plan.grid
        result = self.sim.launch(image, grid, slots, arg_types=None, dual_core=dual_core)
        for host, nbytes, dev in storages.values():
            if nbytes:
                data = self.sim.read(dev, nbytes)
                ctypes.memmove(host, bytes(data), nbytes)
        return result
