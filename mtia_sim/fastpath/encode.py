"""Op records of the fast path: a native op (`mtia_sim.units.native`: a byte copy, a fill, one
numpy ufunc over contiguous operands) as the int64 words `ops_ir` runs, or None when it must stay
in numpy (overlapping operands, more than four dims after merging, a ufunc loop that does not
check out)."""

from __future__ import annotations

import numpy as np

from mtia_sim.fastpath.layout import K_COPY, K_FILL, K_UFUNC
from mtia_sim.fastpath.reloc import extent
from mtia_sim.fastpath.ufuncs import ufunc_loop
from mtia_sim.units.native import CopyOp, FillOp, NativeOp, UfuncOp


def _bounds(a: np.ndarray) -> tuple[int, int]:
    """Host addresses [lo, hi) touched by `a`."""
    lo, hi = extent(a)
    return a.ctypes.data + lo, a.ctypes.data + hi


def _disjoint(a: np.ndarray, b: np.ndarray) -> bool:
    alo, ahi = _bounds(a)
    blo, bhi = _bounds(b)
    return ahi <= blo or bhi <= alo


def _no_self_overlap(a: np.ndarray) -> bool:
    extent = a.itemsize
    for n, s in sorted(((n, abs(s)) for n, s in zip(a.shape, a.strides, strict=True) if n > 1),
                       key=lambda d: d[1]):
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


def _dims(shape: tuple[int, ...], dst: tuple[int, ...], src: tuple[int, ...]) -> list[int] | None:
    """counts[4] + dst strides[4] + src strides[4] (outer first), contiguous dims merged."""
    dims = [(n, d, s) for n, d, s in zip(shape, dst, src, strict=True) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, d, s in reversed(dims):  # inner first
        if merged and d == merged[-1][1] * merged[-1][0] and s == merged[-1][2] * merged[-1][0]:
            m = merged.pop()
            merged.append((m[0] * n, m[1], m[2]))
        else:
            merged.append((n, d, s))
    merged.reverse()
    if len(merged) > 4:
        return None
    merged = [(1, 0, 0)] * (4 - len(merged)) + merged
    return [m[0] for m in merged] + [m[1] for m in merged] + [m[2] for m in merged]


def encode(op: NativeOp) -> list[int] | None:
    """The native record of one op, or None when it must stay in numpy."""
    if isinstance(op, CopyOp):
        dst, src = op.dst, op.src
        if dst.shape != src.shape or dst.itemsize != src.itemsize or not _no_self_overlap(dst):
            return None
        if not _disjoint(dst, src):
            return None
        dims = _dims(dst.shape, dst.strides, src.strides)
        if dims is None:
            return None
        return [K_COPY, dst.itemsize, dst.ctypes.data, src.ctypes.data, *dims]
    if isinstance(op, FillOp):
        dst, value = op.dst, np.asarray(op.value)
        if value.size != 1 or value.dtype != dst.dtype or dst.itemsize not in (1, 2, 4, 8):
            return None
        dims = _dims(dst.shape, dst.strides, (0,) * dst.ndim)
        if dims is None:
            return None
        bits = int.from_bytes(value.tobytes(), "little")
        bits = bits - (1 << 64) if bits >> 63 else bits
        return [K_FILL, dst.itemsize, dst.ctypes.data, bits, *dims]
    return _encode_ufunc(op)


def _encode_ufunc(op: UfuncOp) -> list[int] | None:
    out, fn, args = op.out, op.fn, op.args
    if fn.nout != 1 or fn.nin != len(args) or fn.nin > 2:
        return None
    if not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable):
        return None
    ptrs, steps = [], []
    for a in args:
        if not isinstance(a, np.ndarray) or a.dtype != out.dtype or not a.flags.aligned:
            return None
        if a.ndim == 0:
            ptrs.append(a.ctypes.data)
            steps.append(0)
            continue
        if a.shape != out.shape or not a.flags.c_contiguous:
            return None
        if a.ctypes.data != out.ctypes.data and not _disjoint(a, out):
            return None  # partial overlap: numpy copies the input first
        ptrs.append(a.ctypes.data)
        steps.append(a.itemsize)
    ch = out.dtype.char
    loop = ufunc_loop(fn, ch * fn.nin + "->" + ch)
    if loop is None:
        return None
    ptrs.append(out.ctypes.data)
    steps.append(out.itemsize)
    ptrs += [0] * (3 - len(ptrs))
    steps += [0] * (3 - len(steps))
    return [K_UFUNC, loop[0], loop[1], out.size, *ptrs, *steps]
