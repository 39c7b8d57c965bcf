"""Where a candidate's tensors made without a device land, at no cost to its other torch calls.

Candidates written for host tensors (`torch.empty(n)`, the mtia convention) run unchanged on a GPU
because the worker calls them with CUDA as the default device. `with torch.device("cuda")` does
that through a TorchFunctionMode, which sends *every* torch call in the forward through Python
(`x.stride(0)`, `x.data_ptr()`, `reshape`, each argument Triton's launcher inspects): 2-4 us a
call, ~300 us of host time for a forward of three Triton launches on an H100, enough to make a
20 us kernel chain "host-bound" and charged 600 us (docs/DECISIONS.md, D86). Here only the
tensor constructors the mode rewrites (`torch.utils._device._device_constructors()`) are wrapped,
once per worker, before the tamper snapshot; a wrapper adds `device=` when the call names none and
a default is set, and otherwise costs one global read.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

_DEVICE: torch.device | None = None  # the default while a candidate runs; None: constructors unchanged
_INSTALLED = False


def _constructor_homes() -> list[tuple[Any, str, Callable[..., Any]]]:
    """(module, attribute, function) of each constructor `with torch.device(...)` rewrites."""
    from torch.utils._device import _device_constructors

    wanted = {id(fn) for fn in _device_constructors()}
    homes = []
    for module in (torch, torch.fft, torch.nested):
        for name, value in list(vars(module).items()):
            if id(value) in wanted and not name.startswith("_"):
                homes.append((module, name, value))
    return homes


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def constructor(*args: Any, **kwargs: Any) -> Any:
        if _DEVICE is not None and kwargs.get("device") is None:
            kwargs["device"] = _DEVICE
        return original(*args, **kwargs)

    return constructor


def install_factory_device() -> None:
    """Wrap the tensor constructors (idempotent; call before the tamper snapshot)."""
    global _INSTALLED
    if _INSTALLED:
        return
    for module, name, fn in _constructor_homes():  # the originals only: a wrapper is no constructor of them
        setattr(module, name, _wrap(fn))
    _INSTALLED = True


@contextlib.contextmanager
def factory_device(device: str) -> Iterator[None]:
    """Tensors the wrapped constructors make without a device land on `device` (cpu: no change)."""
    global _DEVICE
    if device == "cpu":
        yield
        return
    install_factory_device()
    previous, _DEVICE = _DEVICE, torch.device(device)
    try:
        yield
    finally:
        _DEVICE = previous
