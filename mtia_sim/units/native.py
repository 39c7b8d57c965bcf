"""What a replay closure does, as data a native executor can run without Python.

`mtia_sim.units.replay` returns closures over numpy views; for the commonest ones (byte copies,
fills, one numpy ufunc over contiguous operands) the closure also carries `native_ops`: a tuple of
`CopyOp` / `FillOp` / `UfuncOp` that do exactly what the closure does, in order. The doorbell
fast path (`mtia_sim.fastpath`) runs those in native code when it can prove the result is
bit-identical (no overlaps, aligned operands, a numpy inner loop it verified); otherwise the
closure runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CopyOp:
    """`np.copyto(dst, src)` of same-dtype views (a byte copy)."""

    dst: np.ndarray
    src: np.ndarray


@dataclass(frozen=True)
class FillOp:
    """`dst[...] = value` with `value` a one-element array of dst's dtype."""

    dst: np.ndarray
    value: np.ndarray


@dataclass(frozen=True)
class UfuncOp:
    """`fn(*args, out=out)` for a numpy ufunc whose operands all have out's dtype."""

    fn: np.ufunc
    args: tuple[np.ndarray, ...]
    out: np.ndarray


NativeOp = CopyOp | FillOp | UfuncOp


def with_ops(fn: Callable[[], Any], *ops: NativeOp) -> Callable[[], Any]:
    """Attach `ops` (what `fn` does) to the closure `fn` and return it."""
    fn.native_ops = ops  # type: ignore[attr-defined]
    return fn


def ops_of(fn: Callable[[], Any]) -> tuple[NativeOp, ...] | None:
    """The ops attached to a replay closure, or None when it has none."""
    return getattr(fn, "native_ops", None)
