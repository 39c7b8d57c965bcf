"""Timing results shared by every target (`timing_mtia`, `timing_gpu`, `timing_host`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TimingStats:
    """Seconds per forward over `runs` measured calls; spread = (p75 - p25) / median."""

    median_s: float
    mean_s: float
    min_s: float
    max_s: float
    p25_s: float
    p75_s: float
    runs: int
    method: str

    @property
    def spread(self) -> float:
        return (self.p75_s - self.p25_s) / self.median_s if self.median_s else 0.0

    @classmethod
    def from_samples(cls, samples: list[float], method: str) -> TimingStats:
        if not samples:
            raise ValueError("no timing samples")
        s = sorted(samples)
        q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0], s[0], s[0]]
        return cls(
            median_s=statistics.median(s),
            mean_s=statistics.fmean(s),
            min_s=s[0],
            max_s=s[-1],
            p25_s=q[0],
            p75_s=q[2],
            runs=len(s),
            method=method,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "p25_s": self.p25_s,
            "p75_s": self.p75_s,
            "spread": self.spread,
            "runs": self.runs,
            "method": self.method,
        }


@dataclass
class Timing:
    """A measurement plus what the verifier needs: the last output and which inputs produced it."""

    stats: TimingStats
    last_output: Any = None
    last_index: int = 0
    launches: list[Any] = field(default_factory=list)  # mtia: LaunchRecords of the last measured call
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # target-specific measurements (details.timing)
