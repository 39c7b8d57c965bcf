"""The memory of the evaluator's simulated device: storages by handle, in the evaluator's process.

The candidate's worker names storages by handle (the ones it allocates: small integers it picks;
the inputs the evaluator places: handles from 2**40 up) and never receives their bytes. Every
request is checked here: unknown or freed handles, views that reach past their storage, dtypes
outside the table, and allocations over the session's memory limit are `DeviceRequestError`s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kegen.eval.wire import DTYPES, MAX_DIMS  # what a tensor may be on the wire, and on the device

PLACED_BASE = 1 << 40  # handles of storages the evaluator placed (inputs)
MAX_STORAGES = 1 << 16  # live storages of one worker session
MIN_CHARGE = 64  # bytes an allocation counts for at least (many tiny storages still add up)


class DeviceRequestError(ValueError):
    """A request from the candidate's process that is malformed or not allowed (the message says why)."""


@dataclass(frozen=True)
class View:
    """A strided view of one storage, checked against its bounds (offset and strides in elements)."""

    handle: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _int(value: Any, what: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise DeviceRequestError(f"{what} must be an integer >= {low}")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > MAX_DIMS:
        raise DeviceRequestError(f"{what} must be a list of at most {MAX_DIMS} integers")
    return tuple(_int(v, what) for v in value)


def host_layout(t: torch.Tensor) -> tuple[np.ndarray, int, list[int]]:
    """How an input tensor goes to the device: (its bytes as uint8 -- a view, not a copy --, element
    offset, strides). A contiguous tensor goes as itself, any other with its whole storage."""
    base = t.detach()
    if base.is_contiguous():
        data = base.reshape(-1).view(torch.uint8).numpy() if base.numel() else np.zeros(0, np.uint8)
        return data, 0, [int(s) for s in base.stride()]
    st = base.untyped_storage()
    data = np.frombuffer(bytes(st), dtype=np.uint8)
    return data, int(base.storage_offset()), [int(s) for s in base.stride()]


class DeviceMemory:
    """Storages of one worker session; `limit_bytes` caps what the candidate may allocate."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.storages: dict[int, np.ndarray] = {}
        self.allocated = 0  # bytes of the candidate's own storages
        self._next_placed = PLACED_BASE

    # --- storages ----------------------------------------------------------------------------------
    def alloc(self, handle: Any, nbytes: Any) -> None:
        handle = _int(handle, "a storage handle", 1)
        nbytes = _int(nbytes, "a storage size")
        if handle >= PLACED_BASE or handle in self.storages:
            raise DeviceRequestError(f"storage handle {handle} is in use or reserved")
        if len(self.storages) >= MAX_STORAGES:
            raise DeviceRequestError(f"over {MAX_STORAGES} live device storages (free some: del tensors)")
        if self.allocated + max(nbytes, MIN_CHARGE) > self.limit_bytes:
            raise DeviceRequestError(
                f"device out of memory: allocating {nbytes} bytes would exceed the candidate's "
                f"{self.limit_bytes >> 20} MiB (memory limit)"
            )
        self.storages[handle] = np.zeros(nbytes, dtype=np.uint8)
        self.allocated += max(nbytes, MIN_CHARGE)

    def free(self, handle: Any) -> None:
        handle = _int(handle, "a storage handle", 1)
        if handle >= PLACED_BASE:
            return  # inputs belong to the evaluator: it frees them after the call
        data = self.storages.pop(handle, None)
        if data is not None:
            self.allocated -= max(data.size, MIN_CHARGE)

    def place(self, t: torch.Tensor) -> dict[str, Any]:
        """Put an input tensor's storage into device memory; its description for the worker."""
        handle, self._next_placed = self._next_placed, self._next_placed + 1
        data, offset, strides = host_layout(t)
        self.storages[handle] = data.copy()
        return {
            "dev": handle,
            "nbytes": int(data.size),
            "offset": offset,
            "shape": [int(s) for s in t.shape],
            "strides": strides,
            "dtype": str(t.dtype).removeprefix("torch."),
        }

    def storage(self, handle: Any) -> np.ndarray:
        data = self.storages.get(handle) if isinstance(handle, int) and not isinstance(handle, bool) else None
        if data is None:
            raise DeviceRequestError(
                f"storage {handle!r} does not exist on the device (freed, or never allocated)"
            )
        return data

    def set_storage(self, handle: int, data: np.ndarray) -> None:
        """The storage's bytes after a launch (same size)."""
        self.storages[handle] = data

    # --- views ---------------------------------------------------------------------------------------
    def view(self, desc: Any) -> View:
        """A checked view from the worker's description {"dev", "offset", "shape", "strides", "dtype"}."""
        if not isinstance(desc, dict):
            raise DeviceRequestError("a device tensor description must be an object")
        dtype = DTYPES.get(str(desc.get("dtype")))
        if dtype is None:
            raise DeviceRequestError(f"unsupported device dtype {desc.get('dtype')!r}")
        shape, strides = _ints(desc.get("shape"), "shape"), _ints(desc.get("strides"), "strides")
        if len(shape) != len(strides):
            raise DeviceRequestError("shape and strides differ in length")
        view = View(
            _int(desc.get("dev"), "a storage handle", 1),
            _int(desc.get("offset"), "offset"),
            shape,
            strides,
            dtype,
        )
        size = self.storage(view.handle).size
        if math.prod(shape):
            last = view.offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
            if (last + 1) * dtype.itemsize > size:
                raise DeviceRequestError(
                    f"device tensor {shape} (strides {strides}, offset {view.offset}) reaches past its "
                    f"storage of {size} bytes"
                )
        return view

    def tensor(self, view: View) -> torch.Tensor:
        """A torch tensor over the device's own bytes (writes go to the device memory)."""
        data = self.storage(view.handle)
        usable = data.size // view.dtype.itemsize * view.dtype.itemsize
        flat = (
            torch.from_numpy(data[:usable]).view(view.dtype) if usable else torch.empty(0, dtype=view.dtype)
        )
        if not math.prod(view.shape):
            return torch.empty(view.shape, dtype=view.dtype)
        return flat.as_strided(view.shape, view.strides, view.offset)

    def read(self, desc: Any) -> torch.Tensor:
        """An output: a plain (contiguous, owned) tensor with the device's bytes of the view."""
        return self.tensor(self.view(desc)).clone()
