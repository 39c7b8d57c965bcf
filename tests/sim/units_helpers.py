"""Helpers for driving the units directly with descriptors (no core)."""

from __future__ import annotations

import numpy as np

from mtia_sim import Simulator, isa
from mtia_sim.isa import CommandDescriptor, DType
from mtia_sim.units.dtypes import NP_DTYPE

L = isa.LOCAL_BASE


def put(sim: Simulator, arr: np.ndarray, off: int, pe: int = 0) -> int:
    """Write `arr` into PE `pe`'s local store at byte `off`; returns its LOCAL_BASE address."""
    sim.write(sim.local_address(pe, off), np.ascontiguousarray(arr))
    return L + off


def get(sim: Simulator, off: int, shape, dtype, pe: int = 0) -> np.ndarray:
    return sim.from_device(sim.local_address(pe, off), shape, dtype)


def strides_of(shape) -> list[int]:
    dims = CommandDescriptor.dims(list(shape))
    s = [1, 1, 1, 1]
    for d in range(2, -1, -1):
        s[d] = s[d + 1] * dims[d + 1]
    return s


def np_of(dt: DType) -> np.dtype:
    return NP_DTYPE[dt]
