"""TTIR front end: Triton-MLIR text (and @jit functions, through Triton's own frontend) → tile IR.

    parse_ttir(text) -> Module
    ttir_from_jit(fn, signature, constexprs) -> str
    module_from_jit(fn, signature, constexprs) -> Module
Errors: TTIRParseError (syntax), UnsupportedOpError (op name, kernel file:line, supported ops),
VerifierError, FrontendError.
"""

from lowering.ttir.errors import FrontendError, TTIRError, TTIRParseError, UnsupportedOpError, VerifierError
from lowering.ttir.parser import parse_ttir

__all__ = [
    "parse_ttir",
    "ttir_from_jit",
    "module_from_jit",
    "TTIRError",
    "TTIRParseError",
    "UnsupportedOpError",
    "VerifierError",
    "FrontendError",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # The frontend imports Triton (slow, and needs its backends to load); load it on first use.
    if name in ("ttir_from_jit", "module_from_jit"):
        from lowering.ttir import frontend

        return getattr(frontend, name)
    raise AttributeError(name)
