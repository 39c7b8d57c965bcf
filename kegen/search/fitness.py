"""Fitness of a candidate: `kegen eval`'s speedup over the baseline (the seed), 0 when not correct.

`evaluate_candidate` is what worker processes call; it returns a plain `Outcome` so it crosses
process boundaries and lands in the store unchanged. The evaluator used by a search is named in
`EvalSliceConfig.evaluator` ("module:function"), so tests can plug in a fake one.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kegen.executor.tasks import FileRef


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


Evaluator = Callable[..., Outcome]


def evaluate_candidate(
    problem: str,
    code: str,
    *,
    baseline: str | None,
    target: str,
    machine: str,
    timeout_s: float | None = None,
) -> Outcome:
    """Evaluate `code` against `problem` with `kegen.eval`; fitness = speedup over `baseline`."""
    try:
        from kegen.eval import EvalConfig, evaluate
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            f"kegen.eval is not available ({exc}); the search needs it to score candidates"
        ) from exc
    kwargs: dict[str, Any] = {"target": target, "machine": machine}
    if timeout_s is not None:
        kwargs["timeout_s"] = timeout_s
    config = _make_config(EvalConfig, kwargs)
    start = time.perf_counter()
    result = evaluate(problem, code, baseline=baseline, config=config)
    return outcome_from_result(result, duration_s=time.perf_counter() - start)


def _make_config(cls: Any, kwargs: dict[str, Any]) -> Any:
    names = set(getattr(cls, "__dataclass_fields__", {}) or kwargs)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


def outcome_from_result(result: Any, duration_s: float | None = None) -> Outcome:
    """Map a `kegen.eval.EvalResult` onto an `Outcome`."""
    status = str(getattr(result.status, "value", result.status))
    profile = compact_profile(dict(getattr(result, "profile", None) or {}))
    speedup = getattr(result, "speedup", None)
    fitness = float(getattr(result, "fitness", 0.0) or 0.0) if status == "ok" else 0.0
    roof = profile.get("roofline_fraction")
    if roof is None and isinstance(profile.get("roofline"), dict):
        roof = profile["roofline"].get("fraction")
    if roof is None:
        cand, roof_t = getattr(result, "candidate_time_s", None), getattr(result, "roofline_time_s", None)
        if cand and roof_t:
            roof = roof_t / cand
    metrics: dict[str, Any] = {}
    for key in ("source_line", "max_abs_error", "roofline_time_s", "speedups"):
        val = getattr(result, key, None)
        if val is not None:
            metrics[key] = val
    return Outcome(
        status=status,
        message=str(getattr(result, "message", "") or ""),
        fitness=fitness,
        speedup=speedup,
        candidate_time_s=getattr(result, "candidate_time_s", None),
        baseline_time_s=getattr(result, "baseline_time_s", None),
        roofline_fraction=roof,
        metrics=metrics,
        profile=profile,
        duration_s=duration_s,
    )


def compact_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """The profile without per-PE detail (kept small in the store; totals stay)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("pes", "per_pe")}
        return v

    return strip(profile)  # type: ignore[no-any-return]


def load_evaluator(spec: str) -> Evaluator:
    """Import an evaluator named "module:function"."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"evaluator {spec!r} must be written 'module:function'")
    fn = getattr(importlib.import_module(module_name), attr, None)
    if fn is None or not callable(fn):
        raise ValueError(f"evaluator {spec!r}: {module_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def run_evaluation(
    spec: str,
    problem: str,
    code: str,
    baseline: str | None,
    target: str,
    machine: str,
    timeout_s: float | None,
) -> dict[str, Any]:
    """Worker-process entry: evaluate and return a dict; an evaluator crash becomes a failed outcome."""
    start = time.perf_counter()
    try:
        out = load_evaluator(spec)(
            problem, code, baseline=baseline, target=target, machine=machine, timeout_s=timeout_s
        )
    except Exception as exc:  # the evaluator itself broke: the node fails, the search goes on
        out = Outcome(status="runtime_error", message=f"evaluator failed: {type(exc).__name__}: {exc}")
    if out.duration_s is None:
        out.duration_s = time.perf_counter() - start
    if out.status != "ok":
        out.fitness = 0.0
    return out.to_dict()


def evaluate_task(
    evaluator: str,
    problem: FileRef,
    code: str,
    baseline: FileRef | None,
    target: str,
    machine: str,
    timeout_s: float | None,
) -> dict[str, Any]:
    """The task executors run for the search: evaluate `code` on whatever machine runs this, with the
problem and baseline files carried as text; returns `Outcome.to_dict()` (plain data)."""
    with tempfile.TemporaryDirectory(prefix="kegen-task-") as tmp:
        scratch = Path(tmp)
        return run_evaluation(
            evaluator,
            problem.materialize(scratch),
            code,
            baseline.materialize(scratch) if baseline is not None else None,
            target,
            machine,
            timeout_s,
        )
