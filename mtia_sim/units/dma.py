"""Fabric interface (DMA): strided copies with bounds and masks, gather, scatter, atomics.

DMA_COPY reads src0 inside the valid box (valid[k] == 0 means shape[k]) and, when src2 != 0,
where the I1 mask src2 (strides src2_stride) is set. Into a local-store destination the other
elements are filled with imm0 (a load with `other=`); into DRAM/SRAM/another PE they are left
untouched (a masked store). Gather/scatter/atomics take U64 device addresses in src1 (any memory)
and an optional I1 mask in src2, and run element by element in index order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from mtia_sim import isa
from mtia_sim.errors import IllegalCommandError, MemoryFaultError
from mtia_sim.events import CommandEvent, MemLevel, MemSpan
from mtia_sim.isa import AtomicOp, CommandDescriptor, DType, Flags, GatherForm, Op
from mtia_sim.memory import MemorySystem
from mtia_sim.units import dtypes
from mtia_sim.units.dtypes import FLOATS, convert, immediate, np_dtype
from mtia_sim.units.native import CopyOp, FillOp, with_ops
from mtia_sim.units.operand import Tally, check_shape


def _valid(desc: CommandDescriptor, shape: tuple[int, ...]) -> tuple[int, ...]:
    valid = []
    for v, n in zip(desc.valid, shape, strict=True):
        if v < 0:
            raise IllegalCommandError(f"DMA valid bounds {desc.valid} must be >= 0")
        valid.append(n if v == 0 else min(v, n))
    return tuple(valid)


def _mask(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...]) -> np.ndarray | None:
    if desc.src2 == 0:
        return None
    v = tally.view("src2 (mask)", desc.src2, DType.I1, shape, desc.src2_stride, write=False)
    return np.asarray(v != 0)


def _fill_value(desc: CommandDescriptor) -> np.ndarray:
    return convert(np.asarray(immediate(desc.imm0, desc.flags)), desc.dtype_out)


def _copy_setup(desc: CommandDescriptor, mem: MemorySystem,
                pe: int) -> tuple[Tally, tuple[int, ...], tuple[int, ...], DType, DType, bool]:
    """Checks of a DMA_COPY: (tally, shape, valid box, dst type, src type, dst fills: local store)."""
    shape = check_shape(desc.shape)
    dt = desc.dtype_out
    src_dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else dt
    if np_dtype(src_dt, "src0").itemsize != np_dtype(dt, "dst").itemsize:
        raise IllegalCommandError(f"DMA_COPY does not convert {src_dt.name} -> {dt.name}; use SIMD_CAST")
    valid = _valid(desc, shape)
    tally = Tally(mem, pe, dma=True)
    fills = tally.resolve("dst", desc.dst, 0, 1).level == MemLevel.LOCAL
    return tally, shape, valid, dt, src_dt, fills


def _unmasked_copy(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...], valid: tuple[int, ...],
                   dt: DType, src_dt: DType, fills: bool) -> Callable[[], None]:
    """The data movement of a DMA_COPY without a mask, as a reusable closure over its views."""
    inner = tuple(slice(0, v) for v in valid)
    empty = any(v == 0 for v in valid)
    fill = _fill_value(desc) if fills and valid != shape else None
    if fills:
        dst = tally.view("dst", desc.dst, dt, shape, desc.dst_stride, write=True)
    elif not empty:
        dst = tally.view("dst", desc.dst, dt, valid, desc.dst_stride, write=True)
    if empty:
        if fill is None:
            return with_ops(lambda: None)

        def fill_only() -> None:
            dst[...] = fill
        return with_ops(fill_only, FillOp(dst, fill))
    src = tally.view("src0", desc.src0, src_dt, valid, desc.src0_stride, write=False)
    body = dst[inner].view(src.dtype)
    if fill is None:
        return with_ops(functools.partial(np.copyto, body, src), CopyOp(body, src))

    def fill_and_copy() -> None:
        dst[...] = fill
        body[...] = src
    return with_ops(fill_and_copy, FillOp(dst, fill), CopyOp(body, src))


def dma_copy(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    tally, shape, valid, dt, src_dt, fills = _copy_setup(desc, mem, pe)
    mask = _mask(desc, tally, shape)
    if mask is None:
        _unmasked_copy(desc, tally, shape, valid, dt, src_dt, fills)()
    else:
        box = np.zeros(shape, dtype=bool)
        box[tuple(slice(0, v) for v in valid)] = True
        mask &= box
        src = _masked_read(tally, desc, src_dt, shape, mask)
        if fills:
            dst = tally.view("dst", desc.dst, dt, shape, desc.dst_stride, write=True)
            dst[...] = np.where(mask, src.view(dst.dtype), _fill_value(desc))
        else:
            _masked_write(tally, desc, dt, mask, src)
    return tally.event(desc, math.prod(shape), dtype_bytes=np_dtype(dt).itemsize)


def dma_copy_replay(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> Callable[[], None] | None:
    """A closure redoing this DMA_COPY's data movement (its event never changes), or None when it
    has a mask (which bytes move, and the event, depend on data)."""
    if desc.src2 != 0:
        return None
    tally, shape, valid, dt, src_dt, fills = _copy_setup(desc, mem, pe)
    return _unmasked_copy(desc, tally, shape, valid, dt, src_dt, fills)


def _element_offsets(strides: list[int], idx: tuple[np.ndarray, ...], itemsize: int) -> np.ndarray:
    offs = np.zeros(idx[0].shape, dtype=np.int64)
    for i, s in zip(idx, strides, strict=True):
        offs += i.astype(np.int64) * s
    return offs * itemsize


def _masked_read(tally: Tally, desc: CommandDescriptor, dt: DType, shape: tuple[int, ...],
                 mask: np.ndarray) -> np.ndarray:
    """src0 values where `mask` (zeros elsewhere); only masked-in addresses must be valid."""
    npd = np_dtype(dt, "src0")
    out = np.zeros(shape, dtype=npd)
    idx = np.nonzero(mask)
    if idx[0].size == 0:
        return out
    offs = _element_offsets(desc.src0_stride, idx, npd.itemsize)
    lo, hi = int(offs.min()), int(offs.max()) + npd.itemsize
    region = tally.resolve("src0", desc.src0, lo, hi)
    raw = region.buffer[(region.offset - lo + offs)[:, None] + np.arange(npd.itemsize)]
    out[idx] = raw.reshape(-1).view(npd)
    tally.count(region.level, idx[0].size * npd.itemsize, False)
    tally.touch(region, region.offset, hi - lo, False)
    _span(tally, region.level, False, desc.src0 + offs, npd.itemsize)
    if desc.src0 % isa.ALIGNMENT:
        tally.misaligned = True
    return out


def _masked_write(tally: Tally, desc: CommandDescriptor, dt: DType, mask: np.ndarray,
                  values: np.ndarray) -> None:
    """dst <- values where `mask`; only masked-in addresses must be valid."""
    npd = np_dtype(dt, "dst")
    idx = np.nonzero(mask)
    if idx[0].size == 0:
        return
    offs = _element_offsets(desc.dst_stride, idx, npd.itemsize)
    lo, hi = int(offs.min()), int(offs.max()) + npd.itemsize
    region = tally.resolve("dst", desc.dst, lo, hi)
    raw = np.ascontiguousarray(values[idx]).view(np.uint8).reshape(-1, npd.itemsize)
    region.buffer[(region.offset - lo + offs)[:, None] + np.arange(npd.itemsize)] = raw
    tally.count(region.level, idx[0].size * npd.itemsize, True)
    tally.touch(region, region.offset, hi - lo, True)
    _span(tally, region.level, True, desc.dst + offs, npd.itemsize)
    if desc.dst % isa.ALIGNMENT:
        tally.misaligned = True


def _span(tally: Tally, level: MemLevel, write: bool, addrs: np.ndarray, itemsize: int) -> None:
    """Record element accesses at device addresses `addrs` in DRAM/SRAM for the SRAM cache model."""
    if level in (MemLevel.DRAM, MemLevel.SRAM):
        tally.spans.append(MemSpan(level, write, 0, itemsize, starts=np.asarray(addrs, dtype=np.int64)))


class AddressedAccess:
    """Element accesses at arbitrary device addresses (gather/scatter/atomics), grouped by memory;
    `record=False` leaves the DRAM/SRAM spans to the caller."""

    def __init__(self, tally: Tally, addrs: np.ndarray, itemsize: int, what: str,
                 record: bool = True) -> None:
        self.tally, self.itemsize, self.addrs = tally, itemsize, addrs
        mem = tally.mem
        self.groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (positions, buffer, offsets)
        self.levels: list[MemLevel] = []  # the memory level of each group
        remaining = np.ones(addrs.shape, dtype=bool)
        spans = [(isa.DRAM_BASE, mem.dram_limit, mem.dram, MemLevel.DRAM, None),
                 (isa.SRAM_BASE, mem.sram_limit, mem.sram, MemLevel.SRAM, None),
                 (isa.LOCAL_BASE, mem.local_limit, None, MemLevel.LOCAL, tally.pe)]
        spans += [(m.device, m.buffer.size, m.buffer, MemLevel.DRAM, None) for m in mem.host_maps]
        for pe in np.unique((addrs[(addrs >= isa.PE_WINDOW_BASE) & (addrs < isa.PE_WINDOW_BASE + mem.num_pes
                                                                     * isa.PE_WINDOW_STRIDE)]
                             - isa.PE_WINDOW_BASE) // isa.PE_WINDOW_STRIDE):
            level = MemLevel.LOCAL if int(pe) == tally.pe else MemLevel.REMOTE_LOCAL
            spans.append((isa.PE_WINDOW_BASE + int(pe) * isa.PE_WINDOW_STRIDE, mem.local_limit, None, level,
                          int(pe)))
        for base, size, buf, level, pe in spans:
            sel = remaining & (addrs >= base) & (addrs + itemsize <= base + size)
            if not sel.any():
                continue
            remaining &= ~sel
            pos = np.nonzero(sel)[0]
            offs = (addrs[pos] - base).astype(np.int64)
            buffer = buf if buf is not None else mem.local(int(pe))  # type: ignore[arg-type]
            self.groups.append((pos, buffer, offs))
            self.levels.append(level)
            if what in ("read", "rmw"):
                self.tally.count(level, pos.size * itemsize, False)
                if record:
                    _span(tally, level, False, addrs[pos], itemsize)
            if what in ("write", "rmw"):
                self.tally.count(level, pos.size * itemsize, True)
                if record:
                    _span(tally, level, True, addrs[pos], itemsize)
            if level == MemLevel.REMOTE_LOCAL:
                self.tally.remote_pe = int(pe)  # type: ignore[arg-type]
        if remaining.any():
            bad = int(addrs[np.nonzero(remaining)[0][0]])
            raise MemoryFaultError(f"DMA {what} of {itemsize} bytes at an address outside every memory",
                                   address=bad)

    def read(self, n: int, npd: np.dtype) -> np.ndarray:
        out = np.zeros(n, dtype=npd)
        ar = np.arange(self.itemsize)
        for pos, buf, offs in self.groups:
            out[pos] = buf[offs[:, None] + ar].reshape(-1).view(npd)
        return out

    def write(self, values: np.ndarray) -> None:
        ar = np.arange(self.itemsize)
        raw = np.ascontiguousarray(values).view(np.uint8).reshape(values.size, self.itemsize)
        for pos, buf, offs in self.groups:
            buf[offs[:, None] + ar] = raw[pos]


def _addresses(desc: CommandDescriptor, tally: Tally,
               shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(flat index of active elements, their U64 addresses as int64) in index order."""
    av = tally.view("src1 (addresses)", desc.src1, DType.U64, shape, desc.src1_stride, write=False)
    addrs = np.ascontiguousarray(av).reshape(-1).astype(np.int64)
    mask = _mask(desc, tally, shape)
    active = np.arange(addrs.size) if mask is None else np.nonzero(mask.reshape(-1))[0]
    return active, addrs[active]


def dma_gather(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    if desc.subop == GatherForm.ROWS:
        return _row_gather(desc, mem, pe)
    if desc.subop != GatherForm.ELEMENTS:
        raise IllegalCommandError(f"DMA_GATHER: unknown GatherForm {desc.subop}")
    shape = check_shape(desc.shape)
    npd = np_dtype(desc.dtype_out, "dst")
    tally = Tally(mem, pe, dma=True)
    active, addrs = _addresses(desc, tally, shape)
    acc = AddressedAccess(tally, addrs, npd.itemsize, "read")
    vals = np.empty(math.prod(shape), dtype=npd)
    vals[...] = _fill_value(desc)
    vals[active] = acc.read(active.size, npd)
    dst = tally.view("dst", desc.dst, desc.dtype_out, shape, desc.dst_stride, write=True)
    dst[...] = vals.reshape(shape)
    return tally.event(desc, vals.size, dtype_bytes=npd.itemsize)


def _row_gather(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    """DMA_GATHER GatherForm.ROWS: one address per row (src1 at index (i0, i1, i2, 0)); the row's
    elements are contiguous from it. The valid box and the optional mask select what is read."""
    shape = check_shape(desc.shape)
    npd = np_dtype(desc.dtype_out, "dst")
    size = npd.itemsize
    tally = Tally(mem, pe, dma=True)
    row_shape = (*shape[:-1], 1)
    av = tally.view("src1 (row addresses)", desc.src1, DType.U64, row_shape, [*desc.src1_stride[:-1], 0],
                    write=False)
    rows = np.ascontiguousarray(av).reshape(-1).astype(np.int64)
    valid = _valid(desc, shape)
    width = shape[-1]
    active = np.zeros(shape, dtype=bool)
    active[tuple(slice(0, v) for v in valid)] = True
    mask = _mask(desc, tally, shape)
    if mask is not None:
        active &= mask
    flat = active.reshape(rows.size, width)
    vals = np.empty((rows.size, width), dtype=npd)
    vals[...] = _fill_value(desc)
    if flat.any():
        r, c = np.nonzero(flat)
        acc = AddressedAccess(tally, rows[r] + c.astype(np.int64) * size, size, "read", record=False)
        vals[r, c] = acc.read(r.size, npd)
        _row_spans(tally, acc, rows, flat, size)
    dst = tally.view("dst", desc.dst, desc.dtype_out, shape, desc.dst_stride, write=True)
    dst[...] = vals.reshape(shape)
    return tally.event(desc, math.prod(shape), dtype_bytes=size)


def _row_spans(tally: Tally, acc: AddressedAccess, rows: np.ndarray, flat: np.ndarray, size: int) -> None:
    """Record a row gather's DRAM/SRAM bytes for the SRAM cache model: one span per row when the
    rows lie in one memory and each reads a leading run of one width, else one span per element."""
    counts = flat.sum(axis=1)
    width = int(counts.max())
    if len(acc.levels) == 1 and bool(np.all(flat[:, :width].all(axis=1) | (counts == 0))):
        if acc.levels[0] in (MemLevel.DRAM, MemLevel.SRAM):
            tally.spans.append(MemSpan(acc.levels[0], False, 0, width * size, starts=rows[counts > 0]))
        return
    for (pos, _, _), level in zip(acc.groups, acc.levels, strict=True):
        _span(tally, level, False, acc.addrs[pos], size)


def dma_scatter(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    dt = desc.dtype_in0 if desc.dtype_in0 != DType.NONE else desc.dtype_out
    npd = np_dtype(dt, "src0")
    tally = Tally(mem, pe, dma=True)
    active, addrs = _addresses(desc, tally, shape)
    src = tally.view("src0", desc.src0, dt, shape, desc.src0_stride, write=False)
    vals = np.ascontiguousarray(src).reshape(-1)[active]
    acc = AddressedAccess(tally, addrs, npd.itemsize, "write")
    acc.write(vals)  # duplicates: the last in index order wins
    return tally.event(desc, math.prod(shape), dtype_bytes=npd.itemsize)


ATOMIC_FNS: dict[AtomicOp, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    AtomicOp.ADD: np.add, AtomicOp.MAX: np.maximum, AtomicOp.MIN: np.minimum,
    AtomicOp.XCHG: lambda old, v: v, AtomicOp.AND: np.bitwise_and, AtomicOp.OR: np.bitwise_or,
    AtomicOp.XOR: np.bitwise_xor,
}


def dma_atomic(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    shape = check_shape(desc.shape)
    dt = desc.dtype_out if desc.dtype_in0 == DType.NONE else desc.dtype_in0
    npd = np_dtype(dt, "src0")
    try:
        op = AtomicOp(desc.subop)
    except ValueError:
        raise IllegalCommandError(f"DMA_ATOMIC: unknown AtomicOp {desc.subop}") from None
    if op in (AtomicOp.AND, AtomicOp.OR, AtomicOp.XOR) and dt in FLOATS:
        raise IllegalCommandError(f"DMA_ATOMIC {op.name} needs an integer type, got {dt.name}")
    tally = Tally(mem, pe, dma=True)
    active, addrs = _addresses(desc, tally, shape)
    src = tally.view("src0", desc.src0, dt, shape, desc.src0_stride, write=False)
    vals = np.ascontiguousarray(dtypes.load(src, dt, bool(desc.flags & Flags.UNSIGNED))).reshape(-1)[active]
    acc = AddressedAccess(tally, addrs, npd.itemsize, "rmw")
    old = acc.read(active.size, npd)
    if bool(desc.flags & Flags.UNSIGNED):
        old = dtypes.as_unsigned(old)
    cmp = convert(np.asarray(immediate(desc.imm0, desc.flags)), dt)
    with np.errstate(all="ignore"):
        if np.unique(addrs).size == addrs.size:
            new = _apply(op, old, vals, cmp)
        else:  # repeated addresses: apply in index order so each sees the previous result
            new = np.empty_like(old)
            current: dict[int, np.generic] = {}
            for i, a in enumerate(addrs.tolist()):
                o = current.get(a, old[i])
                old[i] = o
                new[i] = _apply(op, np.asarray([o]), vals[i:i + 1], cmp)[0]
                current[a] = new[i]
            keep = np.zeros(addrs.size, dtype=bool)
            _, last = np.unique(addrs[::-1], return_index=True)
            keep[addrs.size - 1 - last] = True
            acc_last = AddressedAccess(Tally(mem, pe), addrs[keep], npd.itemsize, "write")
            acc_last.write(new[keep].astype(npd, copy=False))
            _store_old(desc, tally, shape, active, old, dt)
            return tally.event(desc, math.prod(shape), dtype_bytes=npd.itemsize)
    acc.write(new.astype(npd, copy=False))
    _store_old(desc, tally, shape, active, old, dt)
    return tally.event(desc, math.prod(shape), dtype_bytes=npd.itemsize)


def _apply(op: AtomicOp, old: np.ndarray, vals: np.ndarray, cmp: np.ndarray) -> np.ndarray:
    if op == AtomicOp.CAS:
        return np.where(old == cmp.astype(old.dtype), vals.astype(old.dtype), old)
    return ATOMIC_FNS[op](old, vals.astype(old.dtype)).astype(old.dtype)


def _store_old(desc: CommandDescriptor, tally: Tally, shape: tuple[int, ...], active: np.ndarray,
               old: np.ndarray, dt: DType) -> None:
    if desc.dst == 0:
        return
    dst = tally.view("dst", desc.dst, desc.dtype_out if desc.dtype_out != DType.NONE else dt, shape,
                     desc.dst_stride, write=True)
    flat = np.zeros(math.prod(shape), dtype=dst.dtype)
    flat[active] = old.astype(dst.dtype, copy=False)
    dst[...] = flat.reshape(shape)


HANDLERS = {Op.DMA_COPY: dma_copy, Op.DMA_GATHER: dma_gather, Op.DMA_SCATTER: dma_scatter,
            Op.DMA_ATOMIC: dma_atomic}


def execute(desc: CommandDescriptor, mem: MemorySystem, pe: int) -> CommandEvent:
    return HANDLERS[desc.op](desc, mem, pe)
