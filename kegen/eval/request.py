"""One evaluation as a typed, plain-data request: what the search and the bench hand to executors.

    request = EvalRequest(FileRef.of("problem.py"), code, FileRef.of("seed.py"), target="mtia",
                          machine="mtia-2i", timeout_s=300.0)
    result = request.evaluate()          # kegen.eval.evaluate on whatever machine runs this

A worker may sit on another machine (Ray), where the driver's problem and baseline paths do not
exist: a `FileRef` carries a file's text, and the worker uses the path itself when it holds the same
text there (one machine, shared file systems) and a private copy otherwise. Problem files must then
be self-contained (no imports of their own sibling files). A machine given as a TOML file (`--machine
my.toml`) travels the same way: the request carries its text (`machine_file`) and the worker
evaluates on its own copy; a machine name resolves on the worker from kegen's shipped descriptions.
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
    machine_file: FileRef | None = None  # set from `machine` when it names a file on the driver

    def __post_init__(self) -> None:
        if self.machine_file is None and _names_a_file(self.machine):
            object.__setattr__(self, "machine_file", FileRef.of(self.machine))

    def machine_here(self, scratch: Path) -> str:
        """The machine to evaluate on, on this machine: the name, or a path holding the driver's
        machine file (its own path where the same text is there, else a copy under `scratch`)."""
        return self.machine_file.materialize(scratch) if self.machine_file is not None else self.machine

    def config(self, machine: str | None = None) -> EvalConfig:
        """The EvalConfig of this request (the user's settings, then the request's own fields;
        `machine` in place of the request's, e.g. `machine_here`'s path)."""
        fields: dict[str, Any] = {"target": self.target, **self.overrides}
        if machine or self.machine:
            fields["machine"] = machine or self.machine
        if self.timeout_s is not None:
            fields["timeout_s"] = self.timeout_s
        return EvalConfig.from_settings(**fields)

    def evaluate(self) -> EvalResult:
        """`kegen.eval.evaluate` of this request, with the files materialised on this machine."""
        from kegen.eval.api import evaluate

        with tempfile.TemporaryDirectory(prefix="kegen-task-") as tmp:
            scratch = Path(tmp)
            baseline = Path(self.baseline.materialize(scratch)) if self.baseline is not None else None
            config = self.config(self.machine_here(scratch))
            return evaluate(self.problem.materialize(scratch), self.code, baseline=baseline, config=config)


def _names_a_file(machine: str) -> bool:
    """Whether `machine` is a path to a machine description here (not a shipped machine's name)."""
    from mtia_sim.machine import names_a_path

    return bool(machine) and names_a_path(machine) and Path(machine).is_file()
