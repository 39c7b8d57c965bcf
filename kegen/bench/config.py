"""What a bench run is asked (BenchConfig) and what it keeps of each problem (SeedEval, SearchOutcome).

The types the runner and its bridges to kegen (`kegen.bench.adapters`) share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.suites import SuiteProblem


@dataclass(frozen=True)
class BenchConfig:
    """What to run: which suite (and problems), on which target, with how much search."""

    suite: str = "default"
    target: str = "mtia"
    machine: str = "mtia-2i"
    budget: int = 4
    jobs: int = 1
    problems: tuple[str, ...] = ()
    search: bool = True
    search_time_limit_s: float | None = None
    time_limit_s: float | None = None
    eval_timeout_s: float | None = None
    out_dir: Path | None = None
    progress: bool = True
    executor: str = "local"  # "ray": seeds and searches spread over a Ray cluster (kegen.executor)
    compile_baseline: bool = False  # on mtia: time torch.compile per problem (`kegen bench` turns it on)
    ray_address: str | None = None
    operator: str = ""  # the search's operator ("offline" | "llm"); "" = from the settings

    def __post_init__(self) -> None:
        if self.budget < 0:
            raise ValueError(f"--budget must be >= 0 evaluations per problem, got {self.budget}")
        if self.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {self.jobs}")


@dataclass
class SeedEval:
    """What the bench keeps of a seed's evaluation."""

    status: str
    message: str = ""
    speedup: float | None = None
    baseline: str = ""
    roofline: float | None = None
    time_s: float | None = None
    baseline_time_s: float | None = None
    roofline_time_s: float | None = None
    wall_s: float = 0.0
    diagnosis: str = ""  # the profile diagnosis of the seed (one line), when it was profiled


@dataclass
class SearchOutcome:
    """What the bench keeps of a search: its best correct kernel relative to the seed."""

    state: str
    evaluations: int = 0
    time_s: float = 0.0
    seed: SeedEval | None = None  # the root node's evaluation, when the search made one
    found_correct: bool = False  # a correct kernel exists among the evaluated nodes
    gain: float | None = None  # seed time / best time (> 1: the search found a faster kernel)
    best_time_s: float | None = None
    best_roofline: float | None = None
    best_path: str = ""
    message: str = ""
    evals_to_90: int | None = None  # evaluations after the seed's until 90% of the final best fitness
    best_diagnosis: str = ""  # the best correct kernel's profile diagnosis (one line)
    extra: dict[str, Any] = field(default_factory=dict)


EvaluateSeed = Callable[[SuiteProblem, BenchConfig], SeedEval]
SearchProblem = Callable[..., SearchOutcome]  # (problem, config, out_dir[, executor=shared executor])
