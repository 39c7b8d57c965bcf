"""The `__mtia_*` extern symbols of kegen's libdevice (`lowering.backend.libdevice`, the Triton side)
and the SIMD engine op each one becomes (the code generator's side). Kept in the core so the code
generator needs nothing from the Triton adapter."""

from __future__ import annotations

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

SYMBOLS: dict[str, tuple[str, int]] = {
    **{f"__mtia_{k}": (v, 1) for k, v in UNARY.items()},
    **{f"__mtia_{k}": (v, 2) for k, v in BINARY.items()},
    **{f"__mtia_{k}": (v, 1) for k, v in PREDICATES.items()},
}
"""extern symbol -> (SimdOp name, number of operands)."""
