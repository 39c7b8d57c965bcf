"""Files carried as text to where a task runs, and the bench's task: one `kegen.eval` evaluation.

The search's task (`kegen.search.fitness.evaluate_task`) is handed to executors like any other
callable; the executor imports nothing of the search.

A Ray worker may sit on another machine, where the driver's problem and baseline paths do not
exist: `FileRef` carries a file's text, and the worker uses the path itself when it holds the same
text there (one machine, shared file systems) and a private copy otherwise. Problem files must
then be self-contained (no imports of their own sibling files).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def evaluate_result_task(
    problem: FileRef,
    candidate: FileRef,
    baseline: FileRef | None,
    target: str,
    machine: str,
    timeout_s: float | None,
) -> dict[str, Any]:
    """`kegen.eval.evaluate` on whatever machine runs this; returns `EvalResult.to_dict()`."""
    from kegen.eval import EvalConfig, evaluate

    overrides: dict[str, Any] = {"target": target, "machine": machine}
    if timeout_s is not None:
        overrides["timeout_s"] = timeout_s
    with tempfile.TemporaryDirectory(prefix="kegen-task-") as tmp:
        scratch = Path(tmp)
        result = evaluate(
            problem.materialize(scratch),
            Path(candidate.materialize(scratch)),
            baseline=Path(baseline.materialize(scratch)) if baseline is not None else None,
            config=EvalConfig.from_settings(**overrides),
        )
    return result.to_dict()
