"""The profile schema shared by the simulator, `kegen profile`, the graph store, the report and prompts.

    Profile, METRICS                       kegen.profiling.schema: the typed, self-describing schema
                                           (simulator counters declared in mtia_sim.stats)
    from_mtia_launches(launches, machine, roofline)   kegen.profiling.mtia: MTIA simulator counters
    from_host_timing(time_s, roofline)     target cpu (time only)
    diagnose(profile) -> Diagnosis         kegen.profiling.diagnosis: measured bottleneck + remedies
    terminal / prompt / html / source_view kegen.profiling.render: the one renderer module, one
    diagnosis_line                         renderer per audience (numbers by mtia_sim.stats)
    changes / explain                      kegen.profiling.compare: parent -> child

GPU profiles (torch.profiler, ncu) are built by `kegen.eval.trusted.profile_gpu` into the same schema.
"""

from kegen.profiling.diagnosis import REMEDIES, Diagnosis, diagnose, diagnose_profile
from kegen.profiling.mtia import from_mtia_launches
from kegen.profiling.schema import (
    METRICS,
    Bottleneck,
    KernelStat,
    LaunchStat,
    MemoryLevelStat,
    MetricDef,
    Profile,
    SourceLine,
    UnitStat,
    from_host_timing,
)

__all__ = [
    "METRICS",
    "REMEDIES",
    "Bottleneck",
    "Diagnosis",
    "KernelStat",
    "LaunchStat",
    "MemoryLevelStat",
    "MetricDef",
    "Profile",
    "SourceLine",
    "UnitStat",
    "diagnose",
    "diagnose_profile",
    "from_host_timing",
    "from_mtia_launches",
]
