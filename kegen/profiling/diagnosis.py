"""The diagnosis of a profile: the measured bottleneck and the kinds of change that attack it.

One object read by every consumer: the prompts (what to say), the offline operator (which
mutation to try: each mutation declares the remedy kinds it provides and works against), the
knowledge retrieval (by `bound`, the bottleneck's category) and the report. Its one-line text is
`kegen.profiling.render.diagnosis_line`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kegen.profiling.bottleneck import IDLE_PES, profile_bottleneck
from kegen.profiling.schema import Bottleneck, Profile
from kegen.profiling.stalls import stall_info

REMEDIES: dict[str, str] = {
    "parallelism": "more programs so every PE has work (smaller blocks on a grid axis, split long rows)",
    "fewer_bytes": "move fewer bytes: fuse passes, read each input once, reuse tiles on chip",
    "overlap": "overlap transfers with compute: multi-buffering (num_stages), prefetch the next tile",
    "bigger_commands": "fewer, larger commands and blocks: amortise per-command and control overhead",
    "fewer_launches": "fuse kernels: fewer launches and fewer round trips through DRAM",
    "cheaper_math": "cheaper arithmetic: a reciprocal instead of a division, fewer transcendentals",
    "balance": "spread the programs evenly over the PEs",
}
_BY_KIND: dict[tuple[str, str], dict[str, float]] = {
    ("memory", ""): {"fewer_bytes": 1.0, "bigger_commands": 0.3},
    ("launch_overhead", ""): {"fewer_launches": 1.0, "bigger_commands": 0.5},
    ("occupancy", ""): {"parallelism": 1.0, "balance": 0.3},
    ("unit", "DMA"): {"fewer_bytes": 0.6, "bigger_commands": 0.6, "overlap": 0.3},
    ("unit", "CORE"): {"bigger_commands": 1.0, "fewer_launches": 0.3},
    ("unit", ""): {"cheaper_math": 0.8, "bigger_commands": 0.3},
    ("latency", ""): {"overlap": 1.0, "bigger_commands": 0.5},
}
STALL_WEIGHT = 0.5
IMBALANCE = 1.05  # slowest active PE's busy time over the mean from which `balance` is weighed
PROTECT_PARALLELISM = 0.8
TOP_STALLS = 3


@dataclass(frozen=True)
class Diagnosis:
    """A reading of one profile; empty (`Diagnosis()`) when there is none."""

    bottleneck: Bottleneck | None = None
    bound: str | None = None  # the bottleneck's category: memory | compute | latency (knowledge tags)
    remedies: tuple[tuple[str, float], ...] = ()  # remedy kind -> weight, strongest first
    protect: tuple[tuple[str, float], ...] = ()  # remedy kinds a move must not work against -> weight
    stalls: tuple[tuple[str, float], ...] = ()  # top idle stalls: reason -> share of the unit's time
    utilisation: tuple[tuple[str, float], ...] = ()  # unit -> utilisation over the active PEs
    roofline_fraction: float | None = None
    time_s: float | None = None
    idle_pes: float = 0.0  # time-weighted share of the chip's PEs without a program
    facts: tuple[str, ...] = field(default_factory=tuple)

    def cost_weights(self) -> dict[str, float]:
        """Remedy kind -> weight of working against it: its remedy weight plus its protection."""
        out = self.weights()
        for kind, w in self.protect:
            out[kind] = out.get(kind, 0.0) + w
        return out

    def weights(self) -> dict[str, float]:
        """Remedy kind -> weight; a bare `bound` (no measured profile) maps to its usual remedy."""
        if self.remedies:
            return dict(self.remedies)
        return dict(LEGACY_REMEDIES.get(self.bound or "", {}))


def diagnose_profile(prof: Profile) -> Diagnosis:
    """The diagnosis of a profile: its measured bottleneck and weighted remedy kinds."""
    b = profile_bottleneck(prof)
    weights: dict[str, float] = {}

    def add(kind: str, w: float) -> None:
        weights[kind] = weights.get(kind, 0.0) + w

    if b is not None:
        table = _BY_KIND.get((b.kind, b.name)) or _BY_KIND.get((b.kind, ""), {})
        for kind, w in table.items():
            add(kind, w)
    shares = prof.stall_shares or _stall_shares(prof.stalls)
    top = sorted(shares.items(), key=lambda kv: -kv[1])[:TOP_STALLS]
    for reason, share in top:
        for kind in stall_info(reason).remedies:
            add(kind, STALL_WEIGHT * min(share, 1.0))
    idle = (prof.metric("idle_pe_pct") or 0.0) / 100
    if idle >= IDLE_PES:
        add("parallelism", 0.5 * idle)
    protect: dict[str, float] = {}
    longest = max(prof.launches, key=lambda s: s.time_s, default=None)
    if longest is not None and longest.pes_total and longest.programs <= 2 * longest.pes_total:
        # few programs per PE: a change that cuts the programs leaves PEs idle
        protect["parallelism"] = PROTECT_PARALLELISM * (1.0 if longest.programs <= longest.pes_total else 0.5)
    imbalance = prof.metric("load_imbalance") or 1.0
    if imbalance > IMBALANCE:  # the slowest PE sets the time: 1.1x is ~10% of a memory-bound kernel
        add("balance", min(1.0, 3.0 * (imbalance - 1.0)))
    excess = prof.metric("dram_excess")
    if excess is not None and excess > 1.5:
        add("fewer_bytes", min(0.5, 0.25 * (excess - 1)))
    if len(prof.launches) > 1:
        add("fewer_launches", 0.2)
    util = [
        (u.name, float(u.utilization_active if u.utilization_active is not None else u.utilization or 0.0))
        for u in prof.units
    ]
    frac = prof.roofline.get("fraction") if isinstance(prof.roofline, dict) else None
    return Diagnosis(
        bottleneck=b,
        bound=b.category if b else None,
        remedies=tuple(sorted(weights.items(), key=lambda kv: -kv[1])),
        protect=tuple(protect.items()),
        stalls=tuple(top),
        utilisation=tuple(sorted(util, key=lambda t: -t[1])[:5]),
        roofline_fraction=float(frac) if isinstance(frac, int | float) else None,
        time_s=prof.time_s,
        idle_pes=idle,
        facts=tuple(b.evidence) if b else (),
    )


def diagnose(profile: dict[str, Any] | Profile | None) -> Diagnosis:
    """The diagnosis of a stored profile dict (any version) or a `Profile`; empty without one."""
    if not profile:
        return Diagnosis()
    if isinstance(profile, dict):
        if any(k in profile for k in _LEGACY_KEYS):
            return _legacy(profile)
        try:
            profile = Profile.from_dict(profile)
        except (TypeError, ValueError):
            return Diagnosis()
    return diagnose_profile(profile)


_LEGACY_KEYS = ("utilisation", "top_stall_reasons", "bound")
LEGACY_REMEDIES = {
    "memory": {"fewer_bytes": 1.0},
    "compute": {"cheaper_math": 1.0},
    "latency": {"overlap": 1.0},
}


def _legacy(profile: dict[str, Any]) -> Diagnosis:
    """A summary-shaped profile ({bound, utilisation, top_stall_reasons, ...}: test doubles, old runs)."""
    bound = str(profile.get("bound") or "") or None
    util = profile.get("utilisation") or {}
    pairs = (
        [(str(k), float(v)) for k, v in util.items() if isinstance(v, int | float)]
        if isinstance(util, dict)
        else []
    )
    stalls = [
        (str(s[0]), float(s[1]))
        for s in profile.get("top_stall_reasons") or []
        if isinstance(s, list | tuple) and len(s) >= 2
    ]
    frac, t = profile.get("roofline_fraction"), profile.get("time_s")
    b = (
        Bottleneck("reported", bound, bound, 1.0, evidence=["as reported by the evaluator"])
        if bound
        else None
    )
    return Diagnosis(
        bottleneck=b,
        bound=bound,
        remedies=tuple(LEGACY_REMEDIES.get(bound or "", {}).items()),
        stalls=tuple(sorted(stalls, key=lambda kv: -kv[1])[:TOP_STALLS]),
        utilisation=tuple(sorted(pairs, key=lambda kv: -kv[1])[:5]),
        roofline_fraction=float(frac) if isinstance(frac, int | float) else None,
        time_s=float(t) if isinstance(t, int | float) else None,
    )


def _stall_shares(stalls: dict[str, float]) -> dict[str, float]:
    total = sum(v for v in stalls.values() if v > 0)
    if total <= 0:
        return {}
    if total <= 1.0 + 1e-9:  # already shares (GPU)
        return dict(stalls)
    return {k: v / total for k, v in stalls.items()}
