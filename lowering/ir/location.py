"""Source locations of ops: where in the kernel's Python source an op came from.

TTIR carries MLIR locations: file/line/col, names (``loc("x"(#loc3))``), call sites (an op inlined
from ``tl.sum`` carries ``callsite(<in standard.py> at <in the kernel>)``) and fused locations. The
parser resolves the ``#locN`` aliases and flattens each to one `Location`: the innermost file
position, the name (the Python variable, when Triton knows it) and the chain of callers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Location", "UNKNOWN_LOC"]


@dataclass(frozen=True)
class Location:
    """A resolved location. `file` is None for ``loc(unknown)``; `caller` is the call site, if inlined."""

    file: str | None = None
    line: int = 0
    col: int = 0
    name: str | None = None
    caller: Location | None = None

    @property
    def is_known(self) -> bool:
        return self.file is not None or (self.caller is not None and self.caller.is_known)

    def outermost(self) -> Location:
        """The outermost caller's location: for an op inlined from ``tl.sum``, the line in the kernel."""
        loc = self
        while loc.caller is not None and loc.caller.is_known:
            loc = loc.caller
        return loc

    def source_position(self) -> str:
        """``file:line:col`` of the kernel line this op came from (``<unknown>`` when none)."""
        loc = self.outermost()
        if loc.file is None:
            return "<unknown location>"
        return f"{loc.file}:{loc.line}:{loc.col}"

    def __str__(self) -> str:
        return self.source_position()

    def to_mlir(self) -> str:
        """The MLIR spelling, inline (no aliases), e.g. ``loc("x"("k.py":3:4))``."""
        return f"loc({self._body()})"

    def _body(self) -> str:
        if self.file is None:
            inner = "unknown"
        else:
            inner = f"{_quote(self.file)}:{self.line}:{self.col}"
        if self.name is not None:
            inner = f"{_quote(self.name)}({inner})" if self.file is not None else _quote(self.name)
        if self.caller is not None:
            inner = f"callsite({inner} at {self.caller._body()})"
        return inner


UNKNOWN_LOC = Location()


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
