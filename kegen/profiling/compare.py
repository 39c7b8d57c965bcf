"""What changed from a parent's profile to its child's: faster or slower, and where.

`changes` lists the differences a reader (the next prompt, the report) needs; `explain` says in
one line why the child is faster or slower, naming the bottleneck it fixed when it fixed one
(e.g. "fixes the idle PEs: 16 -> 64 of 64 PEs have work").
"""

from __future__ import annotations

from kegen.profiling.schema import Profile
from mtia_sim.stats import fmt_time

UTIL_CHANGE = 0.10  # a unit's utilisation change worth saying (absolute)
TIME_CHANGE = 0.05  # a kernel's time change worth saying (relative)


def _ratio(old: float | None, new: float | None) -> str:
    if not old or not new:
        return ""
    r = old / new
    return f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"


MAJOR_LAUNCH = 0.1  # launches below this share of the forward do not count for occupancy


def _pes(p: Profile) -> tuple[int, int]:
    """(fewest PEs with work in any major launch, PEs on the chip); (0, 0) when unknown."""
    total = p.time_s or 0.0
    major = [s for s in p.launches if total and s.time_s / total >= MAJOR_LAUNCH] or p.launches
    if not major:
        return int(p.metric("pes_used") or 0), int(p.metric("pes_total") or 0)
    return min(s.pes_used for s in major), major[0].pes_total


def changes(parent: Profile, child: Profile) -> list[str]:
    """The differences worth saying, most important first."""
    speed = _ratio(parent.time_s, child.time_s) or "same"
    out = [f"time {fmt_time(parent.time_s)} -> {fmt_time(child.time_s)} ({speed})"]
    occ = _occupancy_change(parent, child)
    if occ:
        out.append(occ)
    pb, cb = parent.bottleneck, child.bottleneck
    if pb and cb and (pb.kind, pb.name) != (cb.kind, cb.name):
        out.append(f"limiter {pb.name} ({pb.kind}) -> {cb.name} ({cb.kind})")
    old_k = {k.name: k for k in parent.kernels}
    new_k = {k.name: k for k in child.kernels}
    for name in old_k.keys() - new_k.keys():
        out.append(f"kernel {name} is gone ({fmt_time(old_k[name].total_s)} in the parent)")
    for name in new_k.keys() - old_k.keys():
        out.append(f"new kernel {name}: {fmt_time(new_k[name].total_s)}")
    for name in old_k.keys() & new_k.keys():
        a, b = old_k[name].total_s, new_k[name].total_s
        if a and abs(b - a) / a >= TIME_CHANGE:
            out.append(f"kernel {name} {fmt_time(a)} -> {fmt_time(b)} ({_ratio(a, b)})")
    for lv in child.memory:
        old = parent.level(lv.level)
        if old and old.bytes_total and abs(lv.bytes_total - old.bytes_total) / old.bytes_total >= TIME_CHANGE:
            out.append(f"{lv.level} bytes {old.bytes_total:.0f} -> {lv.bytes_total:.0f}")
    for u in child.units:
        old_u = parent.unit(u.name)
        ua = old_u.utilization_active if old_u else None
        ub = u.utilization_active
        if ua is not None and ub is not None and abs(ub - ua) >= UTIL_CHANGE:
            out.append(f"{u.name} busy {ua:.0%} -> {ub:.0%} on the active PEs")
    return out


def _occupancy_change(parent: Profile, child: Profile) -> str | None:
    (pu, pt), (cu, ct) = _pes(parent), _pes(child)
    if not pt or not ct or pu == cu:
        return None
    if cu > pu:
        return f"fixes the idle PEs: {pu} -> {cu} of {ct} PEs have work in every major launch"
    return f"fewer PEs have work: {pu} -> {cu} of {ct} in the least occupied major launch"


def explain(parent: Profile, child: Profile) -> str:
    """One line: why the child is faster or slower than the parent."""
    speed = _ratio(parent.time_s, child.time_s) or "no time change"
    pb = parent.bottleneck
    occ = _occupancy_change(parent, child)
    if pb is not None and pb.kind == "occupancy" and occ and occ.startswith("fixes"):
        return f"{speed}: {occ} (the parent's limiter)"
    if (
        pb is not None
        and child.bottleneck is not None
        and (pb.kind, pb.name)
        != (
            child.bottleneck.kind,
            child.bottleneck.name,
        )
    ):
        return f"{speed}: relieves {pb.name} ({pb.kind}); now limited by {child.bottleneck.name}"
    rest = [c for c in changes(parent, child)[1:] if not c.startswith("limiter")]
    return f"{speed}" + (f": {rest[0]}" if rest else "")
