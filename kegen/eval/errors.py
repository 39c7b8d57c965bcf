"""Exceptions of the evaluator (candidate failures are statuses, not exceptions)."""

from __future__ import annotations


class ProblemError(ValueError):
    """The problem file itself is broken (missing Model/get_inputs, syntax error, reference fails)."""


class CandidateError(Exception):
    """A candidate failed in a way that maps to a Status; raised and caught inside the worker."""

    def __init__(self, status: str, message: str, source_line: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.source_line = source_line


class TargetUnavailable(RuntimeError):
    """The requested target cannot run here (no GPU, or the mtia backend is not importable)."""
