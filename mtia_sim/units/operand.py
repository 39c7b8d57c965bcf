"""Tensor operands: the isa's 4-D strided rule as numpy views over the memory arenas.

`Tally` builds the views for one command, checks they lie inside one memory, and records what the
timing model needs (bytes per memory level, local-store ranges, alignment, remote PE).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mtia_sim import isa
from mtia_sim.errors import IllegalCommandError, LocalStoreOverflowError, MemoryFaultError
from mtia_sim.events import AddrRange, CommandEvent, MemLevel, MemSpan
from mtia_sim.isa import CommandDescriptor, DType
from mtia_sim.memory import MemorySystem, Region
from mtia_sim.units.dtypes import np_dtype

MAX_ELEMENTS = 1 << 28  # one command's index space (host-memory guard)
MAX_EXTENT = 1 << 40
VIEW_CACHE_SIZE = 4096
_SHARED = (MemLevel.DRAM, MemLevel.SRAM)


def in_local_space(addr: int, num_pes: int) -> bool:
    """Is `addr` inside the local-store window or a PE window (so an overflow is a local-store one)?"""
    if isa.LOCAL_BASE <= addr < isa.LOCAL_BASE + isa.PE_WINDOW_STRIDE:
        return True
    return isa.PE_WINDOW_BASE <= addr < isa.PE_WINDOW_BASE + num_pes * isa.PE_WINDOW_STRIDE


def check_shape(shape: list[int], what: str = "shape") -> tuple[int, ...]:
    if len(shape) != isa.MAX_DIMS or any(n < 1 for n in shape):
        raise IllegalCommandError(f"{what} {list(shape)} must have {isa.MAX_DIMS} dims, each >= 1")
    total = math.prod(shape)
    if total > MAX_ELEMENTS:
        raise IllegalCommandError(f"{what} {list(shape)} has {total} elements; at most {MAX_ELEMENTS}")
    return tuple(int(n) for n in shape)


class Tally:
    """Operand views of one command plus the facts for its CommandEvent."""

    def __init__(self, mem: MemorySystem, pe: int, dma: bool = False) -> None:
        self.mem, self.pe, self.dma = mem, pe, dma
        self.bytes_read: dict[MemLevel, int] = {}
        self.bytes_written: dict[MemLevel, int] = {}
        self.reads: list[AddrRange] = []
        self.writes: list[AddrRange] = []
        self.misaligned = False
        self.remote_pe: int | None = None
        self.spans: list[MemSpan] = []  # DRAM/SRAM bytes touched, for the timing model's SRAM cache

    # -- bookkeeping -------------------------------------------------------------------------
    def count(self, level: MemLevel, nbytes: int, write: bool) -> None:
        d = self.bytes_written if write else self.bytes_read
        d[level] = d.get(level, 0) + int(nbytes)

    def touch(self, region: Region, lo_offset: int, nbytes: int, write: bool) -> None:
        """Record a local-store range (as LOCAL_BASE addresses) for dependency tracking."""
        if region.level == MemLevel.LOCAL:
            start = isa.LOCAL_BASE + lo_offset
            (self.writes if write else self.reads).append(AddrRange(start, start + int(nbytes)))
        elif region.level == MemLevel.REMOTE_LOCAL:
            self.remote_pe = region.pe

    def resolve(self, name: str, addr: int, lo: int, hi: int) -> Region:
        """Region holding [addr + lo, addr + hi) or the right error."""
        region = self.mem.resolve(addr + lo, hi - lo, self.pe)
        if region is None:
            if in_local_space(addr, self.mem.num_pes) or in_local_space(addr + lo, self.mem.num_pes):
                raise LocalStoreOverflowError(
                    f"{name} bytes [{addr + lo:#x}, {addr + hi:#x}) run outside the local store "
                    f"({self.mem.local_limit} bytes)", address=addr)
            raise MemoryFaultError(
                f"{name} bytes [{addr + lo:#x}, {addr + hi:#x}) are not inside one mapped memory "
                "(DRAM, SRAM or a local store)", address=addr)
        return region

    # -- views -----------------------------------------------------------------------------
    def view(self, name: str, addr: int, dt: DType, shape: tuple[int, ...], strides: list[int],
             *, write: bool, count_bytes: bool = True) -> np.ndarray:
        """Writable numpy view of operand `name` over `shape` with element `strides`.

        Views are cached per (PE, address, type, shape, strides): the arenas never move, and
        commands in loops keep reusing the same operands.
        """
        key = (self.pe, addr, int(dt), tuple(shape), tuple(strides))
        cache = self.mem.view_cache
        hit = cache.get(key)
        if hit is None:
            hit = self._make_view(name, addr, dt, shape, strides)
            if len(cache) >= VIEW_CACHE_SIZE:
                cache.clear()
            cache[key] = hit
        v, region, foot, nbytes = hit
        if self.dma and addr % isa.ALIGNMENT:
            self.misaligned = True
        if count_bytes:
            self.count(region.level, foot, write)
            if region.level in _SHARED:
                skey = (key, write)
                span: Any = cache.get(skey)
                if span is None:
                    span = MemSpan.strided(region.level, write, addr, shape, strides, v.itemsize)
                    cache[skey] = span
                self.spans.append(span)
        self.touch(region, region.offset, nbytes, write)
        return v

    def _make_view(self, name: str, addr: int, dt: DType, shape: tuple[int, ...],
                   strides: list[int]) -> tuple[np.ndarray, Region, int, int]:
        npd = np_dtype(dt, name)
        size = npd.itemsize
        if len(strides) != len(shape):
            raise IllegalCommandError(f"{name}: {len(strides)} strides for {len(shape)} dims")
        lo = hi = 0
        for n, s in zip(shape, strides, strict=False):
            if s:
                if not -MAX_EXTENT <= s <= MAX_EXTENT:
                    raise IllegalCommandError(f"{name} stride {s} is out of range")
                ext = (n - 1) * s * size
                if ext < 0:
                    lo += ext
                else:
                    hi += ext
        hi += size
        region = self.resolve(name, addr, lo, hi)
        v = np.ndarray(shape, npd, region.buffer, region.offset - lo, tuple([s * size for s in strides]))
        foot = size
        for n, s in zip(shape, strides, strict=False):
            if s:
                foot *= n
        return v, region, foot, hi - lo

    def event(self, desc: CommandDescriptor, elements: int, **kw: object) -> CommandEvent:
        return CommandEvent(
            op=desc.op, unit=desc.op.unit, subop=int(desc.subop), elements=int(elements),
            bytes_read=self.bytes_read, bytes_written=self.bytes_written, reads=self.reads,
            writes=self.writes, misaligned=self.misaligned, remote_pe=self.remote_pe, tag=desc.tag,
            spans=self.spans, **kw)  # type: ignore[arg-type]
