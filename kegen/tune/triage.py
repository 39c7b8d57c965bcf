"""Triage: each kernel's share of model time, the hot kernels covering >= 90% of it, the Amdahl bound."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

HOT_COVERAGE = 0.9


@dataclass
class KernelShare:
    name: str
    seconds: float
    share: float
    calls: int
    launch_overhead_s: float = 0.0  # the floor no kernel goes below


@dataclass
class Triage:
    total_s: float
    kernels: list[KernelShare] = field(default_factory=list)
    hot: list[str] = field(default_factory=list)

    @property
    def hot_share(self) -> float:
        return sum(k.share for k in self.kernels if k.name in self.hot)

    @property
    def amdahl_bound(self) -> float:
        """The model's speedup if every hot kernel ran at its launch-overhead floor (cold ones unchanged)."""
        floor = sum(k.launch_overhead_s if k.name in self.hot else k.seconds for k in self.kernels)
        return self.total_s / floor if floor > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_s": self.total_s,
            "hot": list(self.hot),
            "hot_share": self.hot_share,
            "amdahl_bound": self.amdahl_bound,
            "kernels": [asdict(k) for k in self.kernels],
        }


def triage(profile: dict[str, Any], coverage: float = HOT_COVERAGE) -> Triage:
    """A Triage from an evaluation's profile ({"time_s", "kernels": [{name, calls, total_s}],
    "launches": [{kernel, launch_overhead_s}]}): kernels by time, hot ones until `coverage`."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1] (got {coverage})")
    overhead: dict[str, float] = {}
    for launch in profile.get("launches", []):
        overhead[launch["kernel"]] = overhead.get(launch["kernel"], 0.0) + float(
            launch.get("launch_overhead_s", 0.0)
        )
    kernels = [(k["name"], float(k["total_s"]), int(k.get("calls", 1))) for k in profile.get("kernels", [])]
    total = sum(s for _, s, _ in kernels) or float(profile.get("time_s") or 0.0)
    shares = sorted(
        (KernelShare(n, s, s / total if total > 0 else 0.0, c, overhead.get(n, 0.0)) for n, s, c in kernels),
        key=lambda k: -k.seconds,
    )
    hot: list[str] = []
    covered = 0.0
    for k in shares:
        if covered >= coverage - 1e-12:
            break
        hot.append(k.name)
        covered += k.share
    return Triage(total, shares, hot)
