"""Suite metrics: pass rate, fast_p (KernelBench), geometric-mean speedup, roofline fraction.

Definitions (KernelBench, arXiv 2502.10517): a problem *passes* when kegen's kernel for it is
correct; `fast_p` is the share of all problems whose kernel is correct *and* more than p times
faster than the baseline. Geometric means are taken over the correct problems only (a failed
problem has no speedup), and say over how many.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


class Scored(Protocol):
    """What the metrics read from one problem's result."""

    @property
    def correct(self) -> bool: ...

    @property
    def speedup(self) -> float | None: ...

    @property
    def seed_speedup(self) -> float | None: ...

    @property
    def seed_roofline(self) -> float | None: ...

    @property
    def roofline_fraction(self) -> float | None: ...

    @property
    def op_class(self) -> str: ...


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of the positive, finite values; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def evals_to_fraction(fitness: Sequence[float | None], fraction: float = 0.9) -> int | None:
    """How many evaluations after the seed's a search needed before its best so far reached
    `fraction` of its final best fitness (higher = faster); 0 when the seed already did, None when
    nothing was correct.

    `fitness` holds one entry per evaluation in the order they finished, the seed's first, None
    (or <= 0) for one that was not correct."""
    good = [f for f in fitness if f is not None and f > 0 and math.isfinite(f)]
    if not good:
        return None
    goal = fraction * max(good)
    for i, f in enumerate(fitness):
        if f is not None and f > 0 and math.isfinite(f) and f >= goal:
            return i
    return None  # unreachable: the maximum itself reaches the goal


def fast_p(results: Sequence[Scored], p: float = 1.0) -> float:
    """Share of `results` that are correct with speedup > p (0.0 for an empty list)."""
    if not results:
        return 0.0
    return sum(1 for r in results if r.correct and r.speedup is not None and r.speedup > p) / len(results)


@dataclass(frozen=True)
class SuiteMetrics:
    """The numbers that summarize a suite run."""

    problems: int
    correct: int
    pass_rate: float
    fast_0: float
    fast_1: float
    fast_1_5: float
    geomean_speedup: float | None
    geomean_seed_speedup: float | None
    geomean_search_gain: float | None
    geomean_roofline_fraction: float | None
    by_op_class: dict[str, dict[str, Any]] = field(default_factory=dict)
    geomean_seed_roofline_fraction: float | None = None
    compile_compared: int = 0  # problems with a correct kernel and a complete torch.compile time
    fast_1_vs_compile: float | None = None  # fraction of those faster than torch.compile
    geomean_speedup_vs_compile: float | None = None
    targets_set: int = 0  # problems with a roofline target and a verdict on it
    targets_met: int = 0
    median_evals_to_90: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteMetrics:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def summarize(results: Sequence[Scored]) -> SuiteMetrics:
    """Metrics of a list of per-problem results (best kernel = seed or search winner)."""
    correct = [r for r in results if r.correct]
    n = len(results)
    gains = [r.speedup / r.seed_speedup for r in correct
             if r.speedup is not None and r.seed_speedup is not None and r.seed_speedup > 0]
    classes: dict[str, list[Scored]] = {}
    for r in results:
        classes.setdefault(r.op_class, []).append(r)
    vs_compile = [v for r in correct if (v := getattr(r, "speedup_vs_compile", None)) is not None]
    verdicts = [v for r in results if (v := getattr(r, "target_met", None)) is not None]
    to_90 = sorted(v for r in results if (v := getattr(r, "evals_to_90", None)) is not None)
    by_class = {name: {"problems": len(rs), "correct": sum(r.correct for r in rs),
                       "geomean_speedup": geomean(r.speedup for r in rs if r.correct and r.speedup)}
                for name, rs in sorted(classes.items())}
    return SuiteMetrics(
        problems=n,
        correct=len(correct),
        pass_rate=len(correct) / n if n else 0.0,
        fast_0=fast_p(results, 0.0),
        fast_1=fast_p(results, 1.0),
        fast_1_5=fast_p(results, 1.5),
        geomean_speedup=geomean(r.speedup for r in correct if r.speedup is not None),
        geomean_seed_speedup=geomean(r.seed_speedup for r in correct if r.seed_speedup is not None),
        geomean_search_gain=geomean(gains),
        geomean_roofline_fraction=geomean(r.roofline_fraction for r in correct
                                          if r.roofline_fraction is not None),
        by_op_class=by_class,
        geomean_seed_roofline_fraction=geomean(r.seed_roofline for r in correct
                                               if r.seed_roofline is not None),
        compile_compared=len(vs_compile),
        fast_1_vs_compile=sum(v > 1.0 for v in vs_compile) / len(vs_compile) if vs_compile else None,
        geomean_speedup_vs_compile=geomean(vs_compile),
        targets_set=len(verdicts),
        targets_met=sum(verdicts),
        median_evals_to_90=_median(to_90),
    )


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    return float(values[mid]) if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
