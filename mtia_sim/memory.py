"""Memories of the simulated chip: DRAM, SRAM and per-PE local stores as numpy byte arenas.

The same numpy buffers back the Unicorn address space (`mem_map_ptr`) and are read and written by
the functional units, so there is one copy of every byte. `Allocator` hands out DRAM/SRAM blocks.
Host memory can also be mapped into the DRAM address space, above the arena, without a copy
(`map_host`): tensors then live where the host keeps them.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from mtia_sim import isa
from mtia_sim.errors import MemoryFaultError
from mtia_sim.events import MemLevel

PAGE = 0x1000
HOST_MAP_ALIGN = 1 << 30  # host mappings start at the first GiB boundary above the DRAM arena


def page_aligned_buffer(nbytes: int) -> np.ndarray:
    """A zeroed uint8 array of `nbytes` (rounded up to a page) whose data starts on a page boundary."""
    nbytes = -(-nbytes // PAGE) * PAGE
    raw = np.zeros(nbytes + PAGE, dtype=np.uint8)
    start = (-raw.ctypes.data) % PAGE
    return raw[start:start + nbytes]


class SharedLocalStores:
    """Every PE's local store in one memfd, so a fixed host window can show any PE's store.

    `window` is a host address showing PE `pe`'s pages after `show(pe)` (one mmap call, no copy):
    the core maps the window at LOCAL_BASE once and switches PEs without remapping its engine
    (which would flush its translated code). Linux only; `create` returns None elsewhere.
    A forked child gets its own copy at the same addresses (`privatize`, run at fork): shared pages
    would otherwise be written by parent and child alike.
    """

    MAP_FIXED = 0x10  # Linux

    def __init__(self, fd: int, num_pes: int, size: int) -> None:
        self.fd, self.size, self.total = fd, size, num_pes * size
        self._fds = [fd]  # closed when this object goes
        self.all = np.frombuffer(mmap.mmap(fd, self.total, mmap.MAP_SHARED,
                                           mmap.PROT_READ | mmap.PROT_WRITE), dtype=np.uint8)
        libc = ctypes.CDLL(None, use_errno=True)
        self._mmap = libc.mmap
        self._mmap.restype = ctypes.c_void_p
        self._mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_long]
        munmap = libc.munmap
        munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._prot = mmap.PROT_READ | mmap.PROT_WRITE
        self.window = self._map(None, 0, 0)
        self.shown = 0
        weakref.finalize(self, munmap, self.window, size)
        weakref.finalize(self, _close_all, self._fds)
        _LIVE.add(self)

    def _map(self, at: int | None, flags: int, pe: int, length: int | None = None) -> int:
        length = self.size if length is None else length
        addr = self._mmap(at, length, self._prot, mmap.MAP_SHARED | flags, self.fd, pe * self.size)
        if addr is None or addr == ctypes.c_void_p(-1).value or (at is not None and addr != at):
            raise OSError(ctypes.get_errno(), "mmap of a local store failed")
        return int(addr)

    def privatize(self) -> None:
        """Move the stores to a new memfd of this process, same contents, same host addresses."""
        fd = os.memfd_create("mtia-local-stores", os.MFD_CLOEXEC)
        os.ftruncate(fd, self.total)
        with mmap.mmap(fd, self.total, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as tmp:
            copy = np.frombuffer(tmp, dtype=np.uint8)
            step = 1 << 20
            for i in range(0, self.total, step):  # untouched (zero) blocks stay holes
                block = self.all[i:i + step]
                if block.any():
                    copy[i:i + step] = block
            del copy
        self.fd = fd
        self._fds.append(fd)
        self._map(int(self.all.ctypes.data), self.MAP_FIXED, 0, self.total)
        self._map(self.window, self.MAP_FIXED, self.shown)

    def show(self, pe: int) -> None:
        """Make the window show PE `pe`'s local store."""
        if pe != self.shown:
            self._map(self.window, self.MAP_FIXED, pe)
            self.shown = pe

    @classmethod
    def create(cls, num_pes: int, size: int) -> SharedLocalStores | None:
        if sys.platform != "linux" or not hasattr(os, "memfd_create") or size % mmap.PAGESIZE:
            return None
        try:
            fd = os.memfd_create("mtia-local-stores", os.MFD_CLOEXEC)
        except OSError:
            return None
        try:
            os.ftruncate(fd, num_pes * size)
            return cls(fd, num_pes, size)
        except (OSError, ValueError):
            os.close(fd)
            return None


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


_LIVE: weakref.WeakSet[SharedLocalStores] = weakref.WeakSet()


def _privatize_after_fork() -> None:
    for stores in list(_LIVE):
        stores.privatize()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_privatize_after_fork)


class Allocator:
    """First-fit free-list allocator over [base, base + size) with power-of-two alignment."""

    def __init__(self, base: int, size: int, name: str) -> None:
        self.base, self.size, self.name = base, size, name
        self._free: list[tuple[int, int]] = [(base, size)]  # sorted (start, length)
        self._used: dict[int, tuple[int, int]] = {}  # user addr -> (block start, block length)

    def alloc(self, nbytes: int, align: int = 64) -> int:
        if nbytes <= 0:
            raise ValueError(f"allocation size must be positive, got {nbytes}")
        if align <= 0 or align & (align - 1):
            raise ValueError(f"alignment must be a power of two, got {align}")
        for i, (start, length) in enumerate(self._free):
            addr = -(-start // align) * align
            end = addr + nbytes
            if end <= start + length:
                del self._free[i]
                if start + length > end:
                    self._free.insert(i, (end, start + length - end))
                self._used[addr] = (start, end - start)
                return addr
        raise MemoryError(
            f"{self.name}: cannot allocate {nbytes} bytes ({self.used_bytes} of {self.size} in use); "
            f"free buffers or give the Simulator a larger arena")

    def free(self, addr: int) -> None:
        if addr not in self._used:
            raise ValueError(f"{self.name}: {addr:#x} is not an allocated block")
        start, length = self._used.pop(addr)
        self._free.append((start, length))
        self._free.sort()
        merged: list[tuple[int, int]] = []
        for s, n in self._free:
            if merged and merged[-1][0] + merged[-1][1] == s:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((s, n))
        self._free = merged

    def reset(self) -> None:
        self._free = [(self.base, self.size)]
        self._used.clear()

    @property
    def used_bytes(self) -> int:
        return sum(n for _, n in self._used.values())


class Region(NamedTuple):
    """A resolved address: the bytes live in `buffer[offset:]`."""

    buffer: np.ndarray
    offset: int
    level: MemLevel
    base: int  # device address of buffer[0]
    pe: int | None  # owning PE for local stores


class HostMapping(NamedTuple):
    """Host memory mapped into the DRAM address space: `buffer` (its exact bytes) is at `device`; the
    core's engine maps the whole host pages around it, `page_bytes` from `page_device`."""

    device: int
    buffer: np.ndarray
    page_device: int
    page_host: int
    page_bytes: int
    keep: Any  # the object owning the host memory, held while mapped


class MemorySystem:
    """DRAM, SRAM and the local stores, addressed as in `isa` (LOCAL_BASE means the current PE's).

    DRAM addresses are the arena ([DRAM_BASE, DRAM_BASE + dram_bytes)) followed, up to
    `dram_window_bytes`, by host mappings.
    """

    def __init__(self, *, num_pes: int, local_store_bytes: int, sram_bytes: int, dram_bytes: int,
                 dram_window_bytes: int = 0) -> None:
        if local_store_bytes > isa.PE_WINDOW_STRIDE:
            raise ValueError(f"local store of {local_store_bytes} bytes does not fit a PE window "
                             f"({isa.PE_WINDOW_STRIDE} bytes)")
        if sram_bytes > isa.DRAM_BASE - isa.SRAM_BASE:
            raise ValueError(f"SRAM of {sram_bytes} bytes overlaps DRAM in the memory map")
        self.num_pes = num_pes
        self.local_store_bytes = -(-local_store_bytes // PAGE) * PAGE
        self.local_limit = local_store_bytes
        self.dram = page_aligned_buffer(dram_bytes)
        self.sram = page_aligned_buffer(sram_bytes)
        self._local: list[np.ndarray | None] = [None] * num_pes
        self.shared_locals = (SharedLocalStores.create(num_pes, self.local_store_bytes)
                              if os.environ.get("KEGEN_SIM_SHARED_LOCAL", "1") != "0" else None)
        self.dram_alloc = Allocator(isa.DRAM_BASE, dram_bytes, "dram")
        self.sram_alloc = Allocator(isa.SRAM_BASE, sram_bytes, "sram")
        self.dram_limit = dram_bytes
        self.sram_limit = sram_bytes
        window = max(dram_window_bytes, dram_bytes)
        self.dram_window = window  # DRAM address space: arena, then host mappings
        host_base = -(-dram_bytes // HOST_MAP_ALIGN) * HOST_MAP_ALIGN
        self.host_alloc = Allocator(isa.DRAM_BASE + host_base, max(window - host_base, 0),
                                    "dram host mappings")
        self.host_maps: list[HostMapping] = []
        self.view_cache: dict[tuple, tuple] = {}  # operand views (mtia_sim.units.operand.Tally.view)
        # (descriptor bytes, PE) -> (replay closure over views, first CommandEvent), see Core._doorbell
        self.plan_cache: dict[tuple[bytes, int], tuple[Callable[[], None], Any]] = {}
        self.seen_commands: set[tuple[bytes, int]] = set()
        self.on_invalidate: list[Callable[[], None]] = []  # also dropped with the views (native plans)

    def map_host(self, host_addr: int, nbytes: int, keep: Any = None) -> HostMapping:
        """Make the `nbytes` of host memory at `host_addr` DRAM at a new device address (no copy).

        The caller keeps the memory alive and unchanged in place until `unmap_host` (`keep` is held
        meanwhile); the core's engine must map `page_bytes` at `page_device` (see Simulator.map_host).
        """
        if host_addr <= 0 or nbytes <= 0:
            raise ValueError(f"map_host needs a host address and a positive size, "
                             f"got {host_addr:#x}, {nbytes}")
        page_host = host_addr & ~(PAGE - 1)
        page_bytes = -(-(host_addr + nbytes - page_host) // PAGE) * PAGE
        try:
            page_device = self.host_alloc.alloc(page_bytes, PAGE)
        except MemoryError:
            raise MemoryError(f"cannot map {nbytes} more host bytes into the DRAM window "
                              f"({self.host_alloc.used_bytes} of {self.host_alloc.size} mapped): unmap "
                              "buffers that are no longer used") from None
        buffer = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(host_addr))
        device = page_device + (host_addr - page_host)
        m = HostMapping(device, buffer, page_device, page_host, page_bytes, keep)
        self.host_maps.append(m)
        return m

    def unmap_host(self, device: int) -> HostMapping:
        """Forget the host mapping at `device` (as returned by map_host); drops cached views."""
        for i, m in enumerate(self.host_maps):
            if m.device == device:
                del self.host_maps[i]
                self.host_alloc.free(m.page_device)
                self.invalidate_views()
                return m
        raise ValueError(f"{device:#x} is not a mapped host buffer")

    def invalidate_views(self) -> None:
        """Drop every cached operand view and command replay (after the address space changed)."""
        self.view_cache.clear()
        self.plan_cache.clear()
        self.seen_commands.clear()
        for drop in self.on_invalidate:
            drop()

    def local(self, pe: int) -> np.ndarray:
        """PE `pe`'s local store (created zeroed on first use)."""
        buf = self._local[pe]
        if buf is None:
            shared, size = self.shared_locals, self.local_store_bytes
            buf = page_aligned_buffer(size) if shared is None else shared.all[pe * size:(pe + 1) * size]
            self._local[pe] = buf
        return buf

    def allocator(self, level: str) -> Allocator:
        if level == "dram":
            return self.dram_alloc
        if level == "sram":
            return self.sram_alloc
        raise ValueError(f"level must be 'dram' or 'sram', got {level!r}")

    def resolve(self, addr: int, nbytes: int, pe: int | None) -> Region | None:
        """The region holding [addr, addr + nbytes), or None when that range is not all in one memory.

        `pe` is the PE whose local store LOCAL_BASE means (None: LOCAL_BASE is not addressable).
        """
        end = addr + nbytes
        if isa.DRAM_BASE <= addr and end <= isa.DRAM_BASE + self.dram_limit:
            return Region(self.dram, addr - isa.DRAM_BASE, MemLevel.DRAM, isa.DRAM_BASE, None)
        if isa.SRAM_BASE <= addr and end <= isa.SRAM_BASE + self.sram_limit:
            return Region(self.sram, addr - isa.SRAM_BASE, MemLevel.SRAM, isa.SRAM_BASE, None)
        if self.host_maps and addr >= isa.DRAM_BASE:
            for m in self.host_maps:
                if m.device <= addr and end <= m.device + m.buffer.size:
                    return Region(m.buffer, addr - m.device, MemLevel.DRAM, m.device, None)
        if pe is not None and isa.LOCAL_BASE <= addr and end <= isa.LOCAL_BASE + self.local_limit:
            return Region(self.local(pe), addr - isa.LOCAL_BASE, MemLevel.LOCAL, isa.LOCAL_BASE, pe)
        if isa.PE_WINDOW_BASE <= addr < isa.PE_WINDOW_BASE + self.num_pes * isa.PE_WINDOW_STRIDE:
            owner = (addr - isa.PE_WINDOW_BASE) // isa.PE_WINDOW_STRIDE
            base = isa.PE_WINDOW_BASE + owner * isa.PE_WINDOW_STRIDE
            if end <= base + self.local_limit:
                level = MemLevel.LOCAL if owner == pe else MemLevel.REMOTE_LOCAL
                return Region(self.local(owner), addr - base, level, base, owner)
        return None

    def region_kind(self, addr: int, pe: int | None) -> MemLevel | None:
        """The memory `addr` falls in (ignoring its size), or None."""
        r = self.resolve(addr, 1, pe)
        return None if r is None else r.level

    def host_region(self, addr: int, nbytes: int) -> Region:
        """Resolve for host reads/writes (DRAM, SRAM, PE windows); raises MemoryFaultError."""
        if nbytes < 0:
            raise ValueError(f"negative size {nbytes}")
        r = self.resolve(addr, max(nbytes, 1), None)
        if r is None:
            raise MemoryFaultError(
                f"host access of {nbytes} bytes is outside DRAM, SRAM and the PE windows "
                "(LOCAL_BASE is only meaningful on a PE: use PE_WINDOW_BASE + pe * PE_WINDOW_STRIDE)",
                address=addr)
        return r

    def write(self, addr: int, data: bytes | np.ndarray) -> None:
        raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray | memoryview) \
            else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        r = self.host_region(addr, raw.size)
        r.buffer[r.offset:r.offset + raw.size] = raw

    def read(self, addr: int, nbytes: int) -> bytes:
        r = self.host_region(addr, nbytes)
        return r.buffer[r.offset:r.offset + nbytes].tobytes()

    def view(self, addr: int, nbytes: int) -> np.ndarray:
        """A writable uint8 view of host-addressable device memory (no copy)."""
        r = self.host_region(addr, nbytes)
        return r.buffer[r.offset:r.offset + nbytes]
