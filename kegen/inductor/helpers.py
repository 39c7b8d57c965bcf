"""MTIA-friendly versions of the Inductor Triton helpers the mtia lowering cannot take as written.

Inductor's `triton_helpers.maximum` / `minimum` spell NaN propagation as compares, an `or` and a
select; inside `tl.reduce` the reduction engine does not recognise that combiner. These versions
compute the same values with `tl.maximum` / `tl.minimum(..., propagate_nan=ALL)` (one combiner op the
engine has). `install()` puts them into Inductor's module for torch.compile; the drafter writes their
source (HELPERS_SOURCE) into standalone candidates.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import triton
import triton.language as tl

# names in torch._inductor.runtime.triton_helpers replaced by the functions below
OVERRIDES = ("maximum", "minimum", "max2", "min2")


@triton.jit
def maximum(a, b):  # type: ignore[no-untyped-def]
    """Elementwise max that propagates NaN (Inductor's semantics)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def minimum(a, b):  # type: ignore[no-untyped-def]
    """Elementwise min that propagates NaN (Inductor's semantics)."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def max2(a, dim):  # type: ignore[no-untyped-def]
    """Max along `dim`, NaN-propagating."""
    return tl.reduce(a, dim, maximum)


@triton.jit
def min2(a, dim):  # type: ignore[no-untyped-def]
    """Min along `dim`, NaN-propagating."""
    return tl.reduce(a, dim, minimum)


_saved: dict[str, Any] = {}


def install(module: ModuleType | None = None) -> None:
    """Replace OVERRIDES in Inductor's triton_helpers (idempotent; `uninstall()` restores them)."""
    if module is None:
        from torch._inductor.runtime import triton_helpers as module
    assert module is not None
    for name in OVERRIDES:
        if name not in _saved:
            _saved[name] = getattr(module, name)
        setattr(module, name, globals()[name])


def uninstall(module: ModuleType | None = None) -> None:
    """Put Inductor's own helpers back."""
    if module is None:
        from torch._inductor.runtime import triton_helpers as module
    assert module is not None
    for name, fn in _saved.items():
        setattr(module, name, fn)
    _saved.clear()
