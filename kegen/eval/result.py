"""The result of one evaluation: a status, errors, times, speedups, fitness and the profile."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import PurePath
from typing import Any

from mtia_sim.stats import fmt_time

try:
    from enum import StrEnum
except ImportError:  # Python < 3.11 (GPU machines): the same behaviour

    class StrEnum(str, Enum):  # type: ignore[no-redef]  # noqa: UP042
        def __str__(self) -> str:
            return str(self.value)


class Status(StrEnum):
    """What happened to a candidate. Only OK earns a fitness above zero."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    CHEAT_DETECTED = "cheat_detected"


@dataclass
class EvalResult:
    """Everything `evaluate` learned about a candidate; JSON-able through `to_dict()`.

    Times are seconds per call of the model's forward. `speedups` maps each baseline name
    ("baseline", "eager", "compile", "roofline") to baseline_time / candidate_time; the
    "roofline" entry is the fraction of the physical limit reached (1.0 = at the limit).
    """

    status: Status
    message: str = ""
    source_line: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst_index: list[int] | None = None
    trials: int = 0
    seeds: list[int] = field(default_factory=list)
    candidate_time_s: float | None = None
    baseline_time_s: float | None = None
    roofline_time_s: float | None = None
    times: dict[str, float] = field(default_factory=dict)
    speedups: dict[str, float] = field(default_factory=dict)
    speedup: float = 0.0
    fitness: float = 0.0
    profile: dict[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0
    target: str = ""
    machine: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (JSON-able; infinities and NaN become None)."""
        data = asdict(self)
        data["status"] = str(self.status)
        return json_safe(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Inverse of `to_dict()`; unknown keys are kept under `details`."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        kwargs["status"] = Status(data.get("status", Status.RUNTIME_ERROR))
        for key in ("times", "speedups", "profile", "details"):
            kwargs[key] = dict(kwargs.get(key) or {})
        kwargs["seeds"] = list(kwargs.get("seeds") or [])
        if extra:
            kwargs["details"].update(extra)
        return cls(**kwargs)

    @classmethod
    def failure(cls, status: Status, message: str, source_line: str | None = None, **kw: Any) -> EvalResult:
        """A failed evaluation (fitness 0)."""
        return cls(status=status, message=message, source_line=source_line, **kw)

    def verdict_text(self) -> str:
        """A few readable lines: verdict, error, times and speedups."""
        lines = [f"verdict: {self.status.upper()}" + (f" — {self.message}" if self.message else "")]
        if self.source_line:
            lines.append(f"  at {self.source_line}")
        if self.max_abs_error is not None:
            where = f" at index {tuple(self.worst_index)}" if self.worst_index else ""
            rel = f", max rel error {self.max_rel_error:.3g}" if self.max_rel_error is not None else ""
            lines.append(
                f"  max abs error {self.max_abs_error:.3g}{rel}{where} "
                f"over {self.trials} trials (seeds {self.seeds})"
            )
        if "generalises" in self.details:
            lines.append(f"  generalises (edge shapes): {self.details['generalises']}")
        if self.details.get("sandbox_warning"):
            lines.append(f"  warning: {self.details['sandbox_warning']}")
        for name, t in self.times.items():
            lines.append(f"  time {name:<10} {fmt_time(t)}")
        for name, s in self.speedups.items():
            label = "of roofline" if name == "roofline" else f"vs {name}"
            lines.append(
                f"  speedup {label:<12} {s:.3f}x" if name != "roofline" else f"  roofline fraction   {s:.3f}"
            )
        lines.append(
            f"  fitness {self.fitness:.4f}   (wall {self.wall_time_s:.1f} s, target {self.target}"
            + (f", machine {self.machine}" if self.machine else "")
            + ")"
        )
        return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """`value` made JSON-serialisable: non-finite floats become None, keys strings, tuples lists,
    paths strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value
