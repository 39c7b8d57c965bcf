"""One evaluation as a typed, plain-data request: what the search and the bench hand to executors.

    request = EvalRequest(FileRef.of("problem.py"), code, FileRef.of("seed.py"), target="mtia",
                          machine="mtia-2i", timeout_s=300.0)
    result = request.evaluate()          # kegen.eval.evaluate on whatever machine runs this

A worker may sit on another machine (Ray), where the driver's problem and baseline paths do not
exist: a `FileRef` carries a file's text, and the worker uses the path itself when it holds the same
text there (one machine, shared file systems) and a private copy otherwise. Problem files must then
be self-contained (no imports of their own sibling files).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.eval.config import EvalConfig
from kegen.eval.result import EvalResult


@dataclass(frozen=True)
class FileRef:
    """A file as the driver sees it: where it is and what it holds."""

    path: str
    text: str

    @classmethod
    def of(cls, path: str | Path) -> FileRef:
        p = Path(path).resolve()
        return cls(str(p), p.read_text())

    def materialize(self, scratch: Path) -> str:
        """A path holding this text on the machine this runs on."""
        here = Path(self.path)
        try:
            if here.is_file() and here.read_text() == self.text:
                return self.path
        except OSError:
            pass
        digest = hashlib.sha256(self.text.encode()).hexdigest()[:12]
        copy = scratch / digest / here.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(self.text)
        return str(copy)


@dataclass(frozen=True)
class EvalRequest:
    """Everything one evaluation needs: the problem (as a file reference), the candidate's code, the
    baseline to time it against, the target and machine, and the limits (`timeout_s`, plus any
    other `EvalConfig` field in `overrides`)."""

    problem: FileRef
    code: str
    baseline: FileRef | None = None
    target: str = "mtia"
    machine: str = ""
    timeout_s: float | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def config(self) -> EvalConfig:
        """The EvalConfig of this request (the user's settings, then the request's own fields)."""
        fields: dict[str, Any] = {"target": self.target, **self.overrides}
        if self.machine:
            fields["machine"] = self.machine
        if self.timeout_s is not None:
            fields["timeout_s"] = self.timeout_s
        return EvalConfig.from_settings(**fields)

    def evaluate(self) -> EvalResult:
        """`kegen.eval.evaluate` of this request, with the files materialised on this machine."""
        from kegen.eval.api import evaluate

        with tempfile.TemporaryDirectory(prefix="kegen-task-") as tmp:
            scratch = Path(tmp)
            baseline = Path(self.baseline.materialize(scratch)) if self.baseline is not None else None
            return evaluate(
                self.problem.materialize(scratch), self.code, baseline=baseline, config=self.config()
            )
