"""Relocatable native plans: one plan serves every descriptor that differs only in its addresses.

Programs of a grid ring the same descriptors with different tensor addresses (`x + pid * BLOCK`).
A native plan is keyed by the descriptor with its address words (dst, src0..src2) zeroed; its
`Relocation` says how far each address may move: within the memory (DRAM arena, SRAM, a host
mapping, a local store) the registered command used, by a multiple of isa.ALIGNMENT (so the DMA
`misaligned` flag cannot change), and by the same amount for addresses in the same memory (so
operands keep their relative layout: no new overlaps). An address word no op reads may not move.
The native code checks those bounds (`ir.py`: `relocate`), adds the deltas to the op records'
pointers and logs them; `shifted_event` moves the event's DRAM/SRAM spans and local-store ranges
by the same deltas. Commands whose event cannot be attributed to address words get no relocation
(delta 0 only: exact repeats).

With the local stores in one shared mapping (`memory.SharedLocalStores`), a plan whose local
operands are all addressed through LOCAL_BASE serves every PE (`any_pe`): their host pointers also
move by (PE - registering PE) * local-store size, and the event is the same on every PE.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mtia_sim import isa
from mtia_sim.events import AddrRange, CommandEvent
from mtia_sim.fastpath.layout import (
    ADDR_FIRST,
    M_ADDR0,
    M_DMAX,
    M_DMIN,
    M_GROUP,
    M_LOCAL,
    M_LSTRIDE,
    M_PE0,
    M_RELOC,
    META_WORDS,
    N_ADDR,
    OP_WORDS,
)
from mtia_sim.memory import MemorySystem, Region
from mtia_sim.units.native import CopyOp, FillOp, NativeOp

_NEW = object.__new__


def pointer_arrays(op: NativeOp) -> list[tuple[int, np.ndarray]]:
    """(op record word, the array whose data pointer it holds) for every memory operand of `op`."""
    if isinstance(op, CopyOp):
        return [(2, op.dst), (3, op.src)]
    if isinstance(op, FillOp):
        return [(2, op.dst)]
    out = [(4 + i, a) for i, a in enumerate(op.args) if a.ndim > 0]
    return out + [(4 + len(op.args), op.out)]


def extent(a: np.ndarray) -> tuple[int, int]:
    """Bytes [lo, hi) touched by `a`, relative to its data pointer."""
    lo = hi = 0
    for n, s in zip(a.shape, a.strides, strict=True):
        if n > 1:
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
    return lo, hi + a.itemsize


def _device_bounds(mem: MemorySystem, r: Region) -> tuple[int, int]:
    """Device addresses [lo, hi) of the memory `r` is in (as `MemorySystem.resolve` bounds it)."""
    if r.level.value in ("local", "remote_local"):
        return r.base, r.base + mem.local_limit
    if r.buffer is mem.dram:
        return r.base, r.base + mem.dram_limit
    if r.buffer is mem.sram:
        return r.base, r.base + mem.sram_limit
    return r.base, r.base + int(r.buffer.size)  # a host mapping: exactly its bytes


def _host_range(r: Region) -> tuple[int, int]:
    return int(r.buffer.ctypes.data), int(r.buffer.ctypes.data) + int(r.buffer.size)


class Relocation:
    """The relocation record (META_WORDS words) of one plan and which address word each part of its
    event follows."""

    def __init__(self, meta: np.ndarray, spans: list[int], reads: list[int], writes: list[int],
                 any_pe: bool = False) -> None:
        self.meta = meta
        self.spans, self.reads, self.writes = spans, reads, writes
        self.any_pe = any_pe

    @classmethod
    def exact(cls, addrs: list[int]) -> Relocation:
        meta = np.zeros(META_WORDS, dtype=np.int64)
        meta[M_ADDR0:M_ADDR0 + N_ADDR] = addrs
        meta[M_GROUP:M_GROUP + N_ADDR] = range(N_ADDR)
        meta[M_RELOC:] = -1
        return cls(meta, [], [], [])

    @classmethod
    def build(cls, raw: bytes, pe: int, ops: tuple[NativeOp, ...], template: CommandEvent,
              mem: MemorySystem) -> Relocation:
        """The relocation of a plan registered for descriptor `raw` on `pe` (exact when unsure)."""
        words = np.frombuffer(raw, dtype=np.int64)
        addrs = [int(words[ADDR_FIRST + k]) for k in range(N_ADDR)]
        exact = cls.exact(addrs)
        fields: dict[int, tuple[int, Region]] = {}  # address word -> (host pointer, region)
        for k, a in enumerate(addrs):
            r = mem.resolve(a, 1, pe) if a > 0 else None
            if r is not None:
                fields[k] = (int(r.buffer.ctypes.data) + r.offset, r)
        meta = exact.meta.copy()
        ext: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            for word, arr in pointer_arrays(op):
                ks = [k for k, (p, _) in fields.items() if p == arr.ctypes.data]
                if not ks:
                    return exact  # an operand that is not at an address word (a copy?): exact only
                meta[M_RELOC + i * OP_WORDS + word] = ks[0]
                lo, hi = extent(arr)
                for k in ks:  # every address word at this operand (dst == src0 in place) moves with it
                    e = ext.setdefault(k, [lo, hi])
                    e[0], e[1] = min(e[0], lo), max(e[1], hi)
        for k, (lo, hi) in ext.items():
            rlo, rhi = _device_bounds(mem, fields[k][1])
            meta[M_DMIN + k] = rlo - (addrs[k] + lo)
            meta[M_DMAX + k] = rhi - (addrs[k] + hi)
            hlo, hhi = _host_range(fields[k][1])
            for j in sorted(ext):  # the first address word in an overlapping memory sets the group
                jlo, jhi = _host_range(fields[j][1])
                if j < k and jlo < hhi and hlo < jhi:
                    meta[M_GROUP + k] = int(meta[M_GROUP + j])
                    break

        def owner(level: str, start: int, local: bool) -> int | None:
            for k, (lo, hi) in ext.items():
                r = fields[k][1]
                if r.level.value != level:
                    continue
                base = isa.LOCAL_BASE + (addrs[k] - r.base) if local else addrs[k]
                if base + lo <= start < base + hi:
                    return k
            return None

        spans = [owner(s.level.value, s.base if s.starts is None else -1, False) for s in template.spans]
        reads = [owner("local", r.start, True) for r in template.reads]
        writes = [owner("local", r.start, True) for r in template.writes]
        if any(k is None for k in spans + reads + writes):
            return exact
        shared = mem.shared_locals
        any_pe = shared is not None and template.remote_pe is None
        for k in ext:
            r = fields[k][1]
            if r.level.value in ("local", "remote_local"):
                any_pe = any_pe and r.base == isa.LOCAL_BASE
                meta[M_LOCAL + k] = 1
        if any_pe and shared is not None:
            meta[M_PE0], meta[M_LSTRIDE] = pe, shared.size
        else:
            meta[M_LOCAL:M_LOCAL + N_ADDR] = 0
        return cls(meta, spans, reads, writes, any_pe)  # type: ignore[arg-type]


def _moved(obj: Any, field: str, delta: int) -> Any:
    """A copy of the frozen record `obj` (a MemSpan) with `field` moved by `delta`, built through its
    __dict__ (a frozen dataclass' __init__ sets each of its 7 fields through object.__setattr__)."""
    out = _NEW(type(obj))
    d = out.__dict__
    d.update(obj.__dict__)
    d[field] += delta
    return out


def shifted_event(template: CommandEvent, reloc: Relocation, pc: int,
                  deltas: tuple[int, ...]) -> CommandEvent:
    """The event of the plan's command moved by `deltas` (one per address word), at `pc`."""
    ev: Any = _NEW(CommandEvent)
    d = ev.__dict__
    d.update(template.__dict__)  # lists no delta touches stay shared with the template (read-only)
    d["pc"] = pc
    if any(deltas[k] for k in reloc.spans):
        d["spans"] = [s if not deltas[k] else _moved(s, "base", deltas[k])
                      for s, k in zip(template.spans, reloc.spans, strict=True)]
    if any(deltas[k] for k in reloc.reads):
        d["reads"] = [r if not deltas[k] else AddrRange(r.start + deltas[k], r.end + deltas[k])
                      for r, k in zip(template.reads, reloc.reads, strict=True)]
    if any(deltas[k] for k in reloc.writes):
        d["writes"] = [r if not deltas[k] else AddrRange(r.start + deltas[k], r.end + deltas[k])
                       for r, k in zip(template.writes, reloc.writes, strict=True)]
    return ev  # type: ignore[no-any-return]
