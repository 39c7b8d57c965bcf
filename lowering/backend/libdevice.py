"""`triton.language.extra.libdevice` for target mtia: each function becomes `tt.extern_elementwise`
with a `__mtia_*` symbol that the code generator maps to a SIMD engine op (or a short sequence)."""

from __future__ import annotations

from typing import Any

from triton.language import core

from lowering.codegen.extern_symbols import BINARY, PREDICATES, UNARY
from lowering.codegen.extern_symbols import SYMBOLS as SYMBOLS  # re-exported for callers

_FLOATS = ("fp16", "bf16", "fp32", "fp64")


def _signatures(nargs: int, result: str | None = None) -> dict[tuple[Any, ...], tuple[str, Any]]:
    return {tuple(core.dtype(t) for _ in range(nargs)): ("", core.dtype(result or t)) for t in _FLOATS}


def _make(name: str, nargs: int, result: str | None = None) -> Any:
    sigs = {k: (f"__mtia_{name}", v[1]) for k, v in _signatures(nargs, result).items()}

    def fn(*args: Any, _semantic: Any = None) -> Any:
        return core.extern_elementwise("", "", list(args), sigs, is_pure=True, _semantic=_semantic)

    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = f"libdevice.{name} on the MTIA SIMD engine"
    return core.extern(fn)


for _n in UNARY:
    globals()[_n] = _make(_n, 1)
for _n in BINARY:
    globals()[_n] = _make(_n, 2)
for _n in PREDICATES:
    globals()[_n] = _make(_n, 1, "int1")
