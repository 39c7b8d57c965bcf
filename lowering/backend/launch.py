"""Moving tensor storages through the simulator for one launch.

Two halves: `pack_launch` turns a launch's runtime arguments (CPU tensors and scalars) into plain
data — one byte string per distinct storage plus an argument plan — and `SimulatorSession.run`
runs such plain data on a simulator and returns the storages' bytes afterwards. The local driver
does both in one process; the evaluation's out-of-process device (`kegen.eval.trusted.device`) runs
`SimulatorSession.run` on storages kept in its own memory, and the candidate's side
(`lowering.backend.device_client`) only names them.
"""

from __future__ import annotations

import ctypes
import struct
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

from mtia_sim import isa

Buffer: TypeAlias = bytes | bytearray | memoryview | np.ndarray
_EMPTY = np.zeros(0, dtype=np.uint8)


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
    data: list[bytes | memoryview] = field(default_factory=list)


def storage_span(t: Any) -> tuple[int, int]:
    """(host address, byte size) of the storage behind tensor `t`."""
    st = t.untyped_storage()
    return int(st.data_ptr()), int(st.nbytes())


def scalar_slot(value: Any, ty: str) -> int:
    """A runtime scalar as its 64-bit ABI slot: ints sign-extended, floats as float64 bits."""
    if ty.startswith("fp") or ty in ("bf16", "f16", "f32", "f64"):
        return struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return int(value) & 0xFFFF_FFFF_FFFF_FFFF


def as_u8(blob: Buffer) -> np.ndarray:
    """`blob`'s bytes as a flat uint8 array (no copy)."""
    if isinstance(blob, np.ndarray):
        return blob.reshape(-1).view(np.uint8)
    return np.frombuffer(blob, dtype=np.uint8) if len(blob) else _EMPTY


def same_bytes(a: Buffer, b: Buffer, chunk: int = 1 << 22) -> bool:
    """Whether two buffers hold the same bytes (in chunks: no temporary as large as the buffers)."""
    x, y = as_u8(a), as_u8(b)
    if x.size != y.size:
        return False
    if x.size == 0 or x.ctypes.data == y.ctypes.data:
        return True
    for i in range(0, x.size, chunk):
        if not np.array_equal(x[i : i + chunk], y[i : i + chunk]):
            return False
    return True


def _host_view(host: int, nbytes: int) -> memoryview:
    """A writable view of `nbytes` of this process's memory at `host` (no copy)."""
    return memoryview((ctypes.c_char * nbytes).from_address(host)).cast("B")


def pack_launch(args: list[Any], arg_types: list[str], *, copy: bool = True) -> PackedLaunch:
    """Plain data of one launch: storages' bytes (read from host memory) and the argument plan.

    `copy=False` gives views of the storages' memory instead of copies (the caller sends or uses
    them before the tensors can change or be freed: the launcher, within one launch)."""
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
        host, nbytes = storage_span(value)
        if host not in index:
            index[host] = len(packed.keys)
            packed.keys.append(host)
            if not nbytes:
                packed.data.append(b"")
            else:
                packed.data.append(ctypes.string_at(host, nbytes) if copy else _host_view(host, nbytes))
        packed.slots.append(("ptr", index[host], int(value.data_ptr()) - host))
    return packed


def write_back(packed: PackedLaunch, after: Sequence[Buffer | None]) -> None:
    """Copy each storage's bytes after the launch back to host memory (None: unchanged)."""
    for host, before, data in zip(packed.keys, packed.data, after, strict=True):
        if data is None:
            continue
        src = as_u8(data)
        if src.size != len(before):
            raise ValueError(f"device returned {src.size} bytes for a storage of {len(before)}")
        if src.size and src.ctypes.data != host:  # unchanged storages come back as themselves
            np.frombuffer(_host_view(host, src.size), dtype=np.uint8)[:] = src


class SimulatorSession:
    """One simulator per machine; images cached by ELF bytes; simulated time memoised by trace.

    `run` copies each storage into the simulator's DRAM arena (a storage that does not fit there is
    mapped with `Simulator.map_host` instead), launches, and returns every storage's bytes afterwards.
    `stats` accumulates what the launches cost on the host (see `SessionStats`).
    """

    def __init__(self, machine: str) -> None:
        from lowering.backend.timing_memo import memo_simulator

        self.machine = machine
        self.sim, self.memo = memo_simulator(machine)
        self._images: dict[bytes, Any] = {}

    @property
    def stats(self) -> Any:
        """Host seconds and counts of this session's launches (`timing_memo.SessionStats`)."""
        return self.memo.stats

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
        data: Sequence[Buffer],
        arg_types: list[str],
        *,
        dual_core: bool = False,
        blocked: bool = False,
        sram_mode: str = "cache",
        read_back: Collection[int] | None = None,
        edit: Callable[[list[np.ndarray]], None] | None = None,
        peek: Callable[[list[np.ndarray]], None] | None = None,
    ) -> tuple[Any, list[Any]]:
        """Upload `data`, launch, and return (LaunchResult, every storage's bytes afterwards).

        A storage the launch changed comes back as a fresh uint8 copy, one it left unchanged as
        `data`'s own buffer (as uint8); `data` is never written.
        `read_back`: the storages to return (the others are None); default all. `edit` / `peek`
        get the device copies of the storages (writable uint8 views) right before / after the
        launch: to change a few bytes or read a few back without copying whole storages."""
        image = self.image(elf, name)
        self.sim.reset_memory()
        bases: list[int] = []
        mapped: list[tuple[int, np.ndarray]] = []  # storages too big for the arena: (device, buffer)
        try:
            for blob in data:
                src = as_u8(blob)
                bases.append(self._place(src, mapped))
            if edit is not None:
                edit(self._device_views(bases, data, mapped))
            words = _argument_words(slots, bases, arg_types)
            from lowering.passes.pe_mapping import PEMapping

            plan = PEMapping("blocked" if blocked else "round_robin", dual_core).plan(
                grid, self.sim.num_pes, self.sim.cores_per_pe
            )
            words += list(plan.extra_slots)
            stats = self.memo.stats
            before, t0 = stats.timing_s + stats.digest_s, time.perf_counter()
            result = self.sim.launch(
                image, plan.grid, words, arg_types=None, dual_core=dual_core, sram_mode=sram_mode
            )
            stats.functional_s += time.perf_counter() - t0 - (stats.timing_s + stats.digest_s - before)
            if peek is not None:
                peek(self._device_views(bases, data, mapped))
            after = [
                self._read_back(dev, as_u8(b), mapped) if read_back is None or i in read_back else None
                for i, (dev, b) in enumerate(zip(bases, data, strict=True))
            ]
        finally:
            for dev, _ in mapped:
                self.sim.unmap_host(dev)
        return result, after

    def _place(self, src: np.ndarray, mapped: list[tuple[int, np.ndarray]]) -> int:
        """Device address of a copy of `src`: in the DRAM arena, else a mapped page-aligned buffer."""
        try:
            dev = self.sim.alloc(max(src.size, isa.ALIGNMENT), align=isa.ALIGNMENT)
        except MemoryError:
            from mtia_sim.memory import page_aligned_buffer

            buf = page_aligned_buffer(max(src.size, 1))
            buf[: src.size] = src
            dev = self.sim.map_host(buf)
            mapped.append((dev, buf))
            return dev
        if src.size:
            self.sim.memory.view(dev, src.size)[:] = src
        return dev

    def _device_views(
        self, bases: list[int], data: Sequence[Buffer], mapped: list[tuple[int, np.ndarray]]
    ) -> list[np.ndarray]:
        """Writable uint8 views of the storages' device copies (valid until the next `run`)."""
        where = dict(mapped)
        views = []
        for dev, blob in zip(bases, data, strict=True):
            n = as_u8(blob).size
            views.append(where[dev][:n] if dev in where else self.sim.memory.view(dev, n) if n else _EMPTY)
        return views

    def _read_back(self, dev: int, before: np.ndarray, mapped: list[tuple[int, np.ndarray]]) -> np.ndarray:
        """A storage's bytes after the launch: `before` itself when the launch left them unchanged,
        else a fresh copy."""
        for mdev, buf in mapped:
            if mdev == dev:
                return buf[: before.size]  # the mapped buffer itself: unmapped right after, never reused
        if not before.size:
            return _EMPTY.copy()
        view = self.sim.memory.view(dev, before.size)
        return before if same_bytes(view, before) else view.copy()

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
        packed = pack_launch(args, arg_types, copy=False)
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


def _argument_words(slots: list[tuple[Any, ...]], bases: list[int], arg_types: list[str]) -> list[int]:
    """The launch's 64-bit argument words: pointers rebased onto the device copies."""
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
    return words
