"""When a search stops: budget (evaluations, wall time, tokens, cost), plateau, or a target reached."""

from __future__ import annotations

from dataclasses import dataclass

from kegen.search.config import TerminationConfig


@dataclass
class SearchProgress:
    """What the termination check reads, updated by the driver after every evaluation."""

    evaluations: int = 0
    elapsed_s: float = 0.0
    tokens: int = 0
    cost: float = 0.0
    best_fitness: float = 0.0
    best_roofline_fraction: float = 0.0
    steps_since_improvement: int = 0

    def observe(self, fitness: float, roofline_fraction: float | None, min_gain: float = 1e-3) -> bool:
        """Count one evaluation; return True when it improved the best fitness."""
        self.evaluations += 1
        if roofline_fraction is not None and fitness > 0:
            self.best_roofline_fraction = max(self.best_roofline_fraction, roofline_fraction)
        if fitness > self.best_fitness * (1.0 + min_gain) or (self.best_fitness == 0 and fitness > 0):
            self.best_fitness = fitness
            self.steps_since_improvement = 0
            return True
        self.best_fitness = max(self.best_fitness, fitness)
        self.steps_since_improvement += 1
        return False


class Termination:
    """Checks every limit of a `TerminationConfig`; `reason()` names the first one reached."""

    def __init__(self, config: TerminationConfig) -> None:
        self.config = config

    def reason(self, p: SearchProgress) -> str | None:
        """None while the search may go on, else a short reason that is stored with the run."""
        c = self.config
        if c.target_speedup and p.best_fitness >= c.target_speedup:
            return f"target speedup {c.target_speedup:g}x reached ({p.best_fitness:.3f}x)"
        if c.target_roofline_fraction and p.best_roofline_fraction >= c.target_roofline_fraction:
            return (
                f"target roofline fraction {c.target_roofline_fraction:g} reached "
                f"({p.best_roofline_fraction:.3f})"
            )
        if c.max_evaluations and p.evaluations >= c.max_evaluations:
            return f"evaluation budget spent ({p.evaluations} evaluations)"
        if c.time_limit_s and p.elapsed_s >= c.time_limit_s:
            return f"time limit reached ({p.elapsed_s:.0f} s of {c.time_limit_s:g} s)"
        if c.max_tokens and p.tokens >= c.max_tokens:
            return f"token budget spent ({p.tokens} tokens)"
        if c.max_cost and p.cost >= c.max_cost:
            return f"cost budget spent ({p.cost:.4f})"
        if c.plateau_steps and p.steps_since_improvement >= c.plateau_steps:
            return f"plateau: no gain in {p.steps_since_improvement} evaluations"
        return None


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '1.5h' -> seconds."""
    t = text.strip().lower()
    mult = {"s": 1.0, "m": 60.0, "h": 3600.0}
    try:
        if t and t[-1] in mult:
            return float(t[:-1]) * mult[t[-1]]
        return float(t)
    except ValueError as exc:
        raise ValueError(f"time limit {text!r} is not a duration; write e.g. 300, 300s, 5m or 1h") from exc
