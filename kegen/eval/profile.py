"""The evaluator's profile builders: thin re-exports of `kegen.profiling` (the shared schema).

`from_mtia_launches(launches, machine, roofline)` takes the driver's launch records (`.kernel`,
`.grid`, `.result`, optional `.tags`); `from_host_timing(time_s, roofline)` is target cpu; GPU
profiles come from `kegen.eval.trusted.profile_gpu`. See docs/PROFILE.md for the schema.
"""

from __future__ import annotations

from kegen.profiling.mtia import counters_dict, from_mtia_launches
from kegen.profiling.schema import (
    METRICS,
    Bottleneck,
    KernelStat,
    LaunchStat,
    MemoryLevelStat,
    Profile,
    SourceLine,
    UnitStat,
    from_host_timing,
)

__all__ = [
    "METRICS",
    "Bottleneck",
    "KernelStat",
    "LaunchStat",
    "MemoryLevelStat",
    "Profile",
    "SourceLine",
    "UnitStat",
    "counters_dict",
    "from_host_timing",
    "from_mtia_launches",
]
