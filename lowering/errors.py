"""Errors of the mtia lowering (shared by passes, codegen and the pipeline): each names the kernel, the op
and the kernel source line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class LoweringError(Exception):
    """A kernel cannot be lowered to the MTIA PE. The message says what to change."""

    def __init__(self, reason: str, *, kernel: str | None = None, op: Any = None, hint: str = "") -> None:
        self.reason = reason
        self.kernel = kernel
        self.op_name: str | None = getattr(op, "name", None)
        loc = getattr(op, "location", None)
        self.where: str | None = loc.source_position() if loc is not None and loc.is_known else None
        self.hint = hint
        super().__init__(self._message())

    def _message(self) -> str:
        parts = []
        if self.kernel:
            parts.append(f"kernel {self.kernel}")
        if self.op_name:
            parts.append(f"op {self.op_name}")
        if self.where:
            parts.append(f"at {self.where}")
        head = ", ".join(parts)
        msg = f"{head}: {self.reason}" if head else self.reason
        return f"{msg}. {self.hint}" if self.hint else msg

    def located(self, kernel: str, op: Any) -> LoweringError:
        """Fill in the kernel and op when they were not known where the error was raised."""
        if self.kernel is None:
            self.kernel = kernel
        if self.op_name is None and op is not None:
            self.op_name = op.name
            loc = getattr(op, "location", None)
            self.where = loc.source_position() if loc is not None and loc.is_known else None
        self.args = (self._message(),)
        return self


class UnsupportedError(LoweringError):
    """The op (or this form of it) has no lowering to the MTIA units."""


class LocalStoreOverflowError(LoweringError):
    """The tensors live at one point of the kernel do not fit in the PE's local store."""


def did_you_mean(name: str, valid: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> str:
    """`"did you mean 'a' or 'b'? "` for the valid names closest to a misspelt `name`, else ""."""
    close = difflib.get_close_matches(name, sorted(valid), n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(map(repr, close))}? " if close else ""
