"""`triton.language.extra.libdevice` for target mtia: each function becomes `tt.extern_elementwise`
with a `__mtia_*` symbol that the code generator maps to a SIMD engine op (or a short sequence)."""

from __future__ import annotations

from typing import Any

from triton.language import core

_FLOATS = ("fp16", "bf16", "fp32", "fp64")

#: symbol suffix -> SIMD op name (mtia_sim.isa.SimdOp), used by the code generator.
UNARY = {
    "sqrt": "SQRT",
    "sqrt_rn": "SQRT",
    "rsqrt": "RSQRT",
    "exp": "EXP",
    "exp2": "EXP2",
    "log": "LOG",
    "log2": "LOG2",
    "log1p": "LOG1P",
    "expm1": "EXPM1",
    "sin": "SIN",
    "cos": "COS",
    "tan": "TAN",
    "asin": "ASIN",
    "acos": "ACOS",
    "atan": "ATAN",
    "sinh": "SINH",
    "cosh": "COSH",
    "tanh": "TANH",
    "erf": "ERF",
    "floor": "FLOOR",
    "ceil": "CEIL",
    "trunc": "TRUNC",
    "rint": "ROUND",
    "nearbyint": "ROUND",
    "fabs": "ABS",
    "abs": "ABS",
    "fast_expf": "EXP",
    "fast_logf": "LOG",
    "fast_log2f": "LOG2",
    "fast_sinf": "SIN",
    "fast_cosf": "COS",
    "fast_tanf": "TAN",
    "rcp_rn": "RECIP",
    "frcp_rn": "RECIP",
    "neg": "NEG",
}
BINARY = {
    "pow": "POW",
    "powf": "POW",
    "atan2": "ATAN2",
    "fmod": "REM",
    "fmax": "MAX",
    "fmin": "MIN",
    "div_rn": "DIV",
    "fdiv_rn": "DIV",
    "fast_dividef": "DIV",
    "div_rz": "DIV",
    "add_rn": "ADD",
    "sub_rn": "SUB",
    "mul_rn": "MUL",
    "fast_powf": "POW",
}
PREDICATES = {"isnan": "ISNAN", "isinf": "ISINF"}


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

SYMBOLS: dict[str, tuple[str, int]] = {
    **{f"__mtia_{k}": (v, 1) for k, v in UNARY.items()},
    **{f"__mtia_{k}": (v, 2) for k, v in BINARY.items()},
    **{f"__mtia_{k}": (v, 1) for k, v in PREDICATES.items()},
}
"""extern symbol -> (SimdOp name, number of operands)."""
