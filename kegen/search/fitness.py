"""Fitness of a candidate: `kegen eval`'s speedup over the baseline (the seed), 0 when not correct.

An evaluator is a callable `(EvalRequest) -> Outcome` (`evaluate_candidate` by default; tests plug
in fakes, and `--evaluator module:function` names one). Executors run `evaluate_task(evaluator,
request)`, which returns `Outcome.to_dict()`: plain data that crosses process and machine
boundaries and becomes an `Outcome` again with `Outcome.from_dict`. An `Outcome` is built from an
`EvalResult` in one place, `Outcome.from_result`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kegen.eval.request import EvalRequest


@dataclass
class Outcome:
    """What the search keeps of one evaluation."""

    status: str
    message: str = ""
    fitness: float = 0.0
    speedup: float | None = None
    candidate_time_s: float | None = None
    baseline_time_s: float | None = None
    roofline_fraction: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        """An Outcome from `to_dict()`'s plain data (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_result(cls, result: Any, duration_s: float | None = None) -> Outcome:
        """The Outcome of a `kegen.eval.EvalResult`: the one place an evaluation becomes an Outcome."""
        status = str(getattr(result.status, "value", result.status))
        profile = compact_profile(dict(result.profile or {}))
        fitness = float(result.fitness or 0.0) if status == "ok" else 0.0
        roof = profile.get("roofline_fraction")
        if roof is None and isinstance(profile.get("roofline"), dict):
            roof = profile["roofline"].get("fraction")
        if roof is None and result.candidate_time_s and result.roofline_time_s:
            roof = result.roofline_time_s / result.candidate_time_s
        metrics = {
            key: getattr(result, key)
            for key in ("source_line", "max_abs_error", "roofline_time_s", "speedups")
            if getattr(result, key, None) is not None
        }
        return cls(
            status=status,
            message=str(result.message or ""),
            fitness=fitness,
            speedup=result.speedup,
            candidate_time_s=result.candidate_time_s,
            baseline_time_s=result.baseline_time_s,
            roofline_fraction=roof,
            metrics=metrics,
            profile=profile,
            duration_s=duration_s,
        )


Evaluator = Callable[[EvalRequest], Outcome]


def evaluate_candidate(request: EvalRequest) -> Outcome:
    """The default evaluator: `kegen.eval` of the request; fitness = speedup over its baseline."""
    start = time.perf_counter()
    result = request.evaluate()
    return Outcome.from_result(result, duration_s=time.perf_counter() - start)


def compact_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """The profile without per-PE detail (kept small in the store; totals stay)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("pes", "per_pe")}
        return v

    return strip(profile)  # type: ignore[no-any-return]


def load_evaluator(spec: str) -> Evaluator:
    """Import an evaluator named "module:function" (the `--evaluator` option)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"evaluator {spec!r} must be written 'module:function'")
    fn = getattr(importlib.import_module(module_name), attr, None)
    if fn is None or not callable(fn):
        raise ValueError(f"evaluator {spec!r}: {module_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def evaluate_task(evaluator: Evaluator, request: EvalRequest) -> dict[str, Any]:
    """The task executors run for the search: `evaluator(request)` on whatever machine runs this;
    returns `Outcome.to_dict()` (plain data). An evaluator crash becomes a failed outcome."""
    start = time.perf_counter()
    try:
        out = evaluator(request)
    except Exception as exc:  # the evaluator itself broke: the node fails, the search goes on
        out = Outcome(status="runtime_error", message=f"evaluator failed: {type(exc).__name__}: {exc}")
    if out.duration_s is None:
        out.duration_s = time.perf_counter() - start
    if out.status != "ok":
        out.fitness = 0.0
    return out.to_dict()
