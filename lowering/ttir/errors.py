"""Errors of the TTIR front end, each with a message a user can act on."""

from __future__ import annotations

from collections.abc import Sequence

from lowering.ir.location import Location
from lowering.ir.verifier import VerifierError

__all__ = ["TTIRError", "TTIRParseError", "UnsupportedOpError", "VerifierError", "FrontendError", "snippet"]


class TTIRError(Exception):
    """Base of the TTIR front end's errors."""


def snippet(text: str, line: int, col: int, context: int = 1) -> str:
    """The source lines around `line` (1-based) with a caret under `col` (1-based)."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    out = []
    for n in range(max(1, line - context), line + 1):
        out.append(f"{n:5d} | {lines[n - 1]}")
    out.append("      | " + " " * max(0, col - 1) + "^")
    return "\n".join(out)


class TTIRParseError(TTIRError):
    """The TTIR text is not well formed: `line`/`col` in the TTIR, a snippet, and what was expected."""

    def __init__(
        self, message: str, line: int = 0, col: int = 0, text: str | None = None, expected: Sequence[str] = ()
    ) -> None:
        self.line = line
        self.col = col
        self.expected = list(expected)
        where = f"TTIR line {line}, column {col}: " if line else ""
        full = where + message
        if expected:
            full += "\n  expected one of: " + ", ".join(sorted(expected)[:20])
        if text is not None and line:
            full += "\n" + snippet(text, line, col)
        super().__init__(full)
        self.message = message


class UnsupportedOpError(TTIRError):
    """The TTIR holds an op the tile IR does not know.

    `op_name` is the op, `location` where in the kernel's source it came from (from its MLIR
    location), `ttir_line` the line in the TTIR, `supported` the ops the IR knows.
    """

    def __init__(
        self, op_name: str, location: Location | None, ttir_line: int, supported: Sequence[str]
    ) -> None:
        self.op_name = op_name
        self.location = location
        self.ttir_line = ttir_line
        self.supported = list(supported)
        src = location.source_position() if location is not None else "<unknown location>"
        dialect = op_name.split(".", 1)[0]
        same_dialect = [s for s in self.supported if s.startswith(dialect + ".")]
        listing = ", ".join(same_dialect) if same_dialect else ", ".join(self.supported)
        super().__init__(
            f"unsupported op '{op_name}' at {src} (TTIR line {ttir_line}). "
            f"The tile IR supports {len(self.supported)} ops"
            + (f"; in dialect '{dialect}': {listing}" if same_dialect else f": {listing}")
            + ". Rewrite the kernel without it, or add the op to lowering/ir/registry.py."
        )


class FrontendError(TTIRError):
    """Triton's frontend could not turn the @jit function into TTIR (bad signature, compile error)."""
