"""Moving tensor storages through the simulator for one launch.

Two halves: `pack_launch` turns a launch's runtime arguments (CPU tensors and scalars) into plain
data — one byte string per distinct storage plus an argument plan — and `SimulatorSession.run`
runs such plain data on a simulator and returns the storages' bytes afterwards. The local driver
does both in one process; the evaluation's out-of-process device (`lowering.backend.device_client`
on the candidate's side, `kegen.eval.device` on the evaluator's) sends the plain data over a socket.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mtia_sim import isa


@dataclass
class LaunchRecord:
    """One kernel launch: the kernel's name, the grid, and the simulator's LaunchResult."""

    kernel: str
    grid: tuple[int, int, int]
    result: Any
    tags: tuple[str, ...] = ()  # command tag N is tags[N - 1]: "<ttir op> <file:line:col>" (profiles)


@dataclass
class PackedLaunch:
    """A launch as plain data.

    `slots`: per runtime argument, ("ptr", storage index, byte offset), ("null",) or
    ("scalar", 64-bit slot). `keys`/`data`: each distinct storage's host address and its bytes.
    """

    slots: list[tuple[Any, ...]] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)


def _storage_span(t: Any) -> tuple[int, int]:
    """(host address, byte size) of the storage behind tensor `t`."""
    st = t.untyped_storage()
    return int(st.data_ptr()), int(st.nbytes())


def scalar_slot(value: Any, ty: str) -> int:
    """A runtime scalar as its 64-bit ABI slot: ints sign-extended, floats as float64 bits."""
    if ty.startswith("fp") or ty in ("bf16", "f16", "f32", "f64"):
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(value) & 0xFFFF_FFFF_FFFF_FFFF


def pack_launch(args: list[Any], arg_types: list[str]) -> PackedLaunch:
    """Plain data of one launch: storages' bytes (read from host memory) and the argument plan."""
    packed = PackedLaunch()
    index: dict[int, int] = {}
    for value, ty in zip(args, arg_types, strict=True):
        if not ty.startswith("*"):
            packed.slots.append(("scalar", scalar_slot(value, ty)))
            continue
        if value is None:
            packed.slots.append(("null",))
            continue
        if not hasattr(value, "untyped_storage"):
            raise TypeError(f"pointer argument of type {ty} must be a torch tensor, got {type(value)}")
        if value.device.type != "cpu":
            raise ValueError(f"mtia kernels take CPU tensors; got a tensor on {value.device}")
        host, nbytes = _storage_span(value)
        if host not in index:
            index[host] = len(packed.keys)
            packed.keys.append(host)
            packed.data.append(ctypes.string_at(host, nbytes) if nbytes else b"")
        packed.slots.append(("ptr", index[host], int(value.data_ptr()) - host))
    return packed


def write_back(packed: PackedLaunch, after: list[bytes | bytearray | None]) -> None:
    """Copy each storage's bytes after the launch back to host memory (None: unchanged)."""
    for host, before, data in zip(packed.keys, packed.data, after, strict=True):
        if data is None:
            continue
        if len(data) != len(before):
            raise ValueError(f"device returned {len(data)} bytes for a storage of {len(before)}")
        if data:
            ctypes.memmove(host, bytes(data), len(data))


class SimulatorSession:
    """One simulator per machine; images cached by ELF bytes."""

    def __init__(self, machine: str) -> None:
        from mtia_sim.simulator import Simulator

        self.machine = machine
        self.sim = Simulator(machine=machine)
        self._images: dict[bytes, Any] = {}

    def image(self, elf: bytes, name: str) -> Any:
        img = self._images.get(elf)
        if img is None:
            img = self.sim.load_image(elf, entry=name)
            self._images[elf] = img
        return img

    def run(
        self,
        elf: bytes,
        name: str,
        grid: tuple[int, int, int],
        slots: list[tuple[Any, ...]],
        data: Sequence[bytes | bytearray],
        arg_types: list[str],
        *,
        dual_core: bool = False,
        blocked: bool = False,
        sram_mode: str = "cache",
    ) -> tuple[Any, list[bytes]]:
        """Upload `data`, launch, and return (LaunchResult, every storage's bytes afterwards)."""
        image = self.image(elf, name)
        self.sim.reset_memory()
        bases = []
        for blob in data:
            dev = self.sim.alloc(max(len(blob), isa.ALIGNMENT), align=isa.ALIGNMENT)
            if blob:
                self.sim.write(dev, bytes(blob))
            bases.append(dev)
        words: list[int] = []
        for slot in slots:
            if slot[0] == "ptr":
                words.append(bases[int(slot[1])] + int(slot[2]))
            elif slot[0] == "null":
                words.append(0)
            else:
                words.append(int(slot[1]) & 0xFFFF_FFFF_FFFF_FFFF)
        if len(words) != len(arg_types):
            raise ValueError(f"{len(words)} argument slots for {len(arg_types)} argument types")
        from lowering.passes.pe_mapping import PEMapping

        plan = PEMapping("blocked" if blocked else "round_robin", dual_core).plan(
            grid, self.sim.num_pes, self.sim.cores_per_pe
        )
        words += list(plan.extra_slots)
        result = self.sim.launch(
            image, plan.grid, words, arg_types=None, dual_core=dual_core, sram_mode=sram_mode
        )
        after = [
            self.sim.read(dev, len(blob)) if blob else b"" for dev, blob in zip(bases, data, strict=True)
        ]
        return result, after

    def launch(
        self,
        fn: Any,
        grid: tuple[int, int, int],
        args: list[Any],
        arg_types: list[str],
        *,
        dual_core: bool = False,
        blocked: bool = False,
        sram_mode: str = "cache",
    ) -> Any:
        """Copy tensor storages in, launch, copy them back; return the LaunchResult."""
        packed = pack_launch(args, arg_types)
        result, after = self.run(
            fn.elf,
            fn.name,
            grid,
            packed.slots,
            packed.data,
            arg_types,
            dual_core=dual_core,
            blocked=blocked,
            sram_mode=sram_mode,
        )
        write_back(packed, list(after))
        return result
