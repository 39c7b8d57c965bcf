"""torch.compile on the simulated MTIA as a bench baseline: each problem's compile time (simulated),
so the report reads like KernelEvolve's (speedup over the compiler, not only over a seed).

Each problem is compiled in its own process (`python -m kegen.inductor.baseline`), so a compiler
failure or a hang costs that problem's column only.
"""

from __future__ import annotations

from typing import Any

from kegen.bench.results import ProblemResult
from kegen.suites import SuiteProblem

TIMEOUT_S = 600.0


def measure(problem: SuiteProblem, machine: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The compile baseline of one problem as plain data ({"seconds", "host_ops", ...} or {"error"})."""
    from kegen.inductor.baseline import measure_in_subprocess

    return measure_in_subprocess(problem.problem_path, machine, timeout_s)


def add_compile_baselines(rows: list[ProblemResult], problems: list[SuiteProblem], machine: str,
                          timeout_s: float = TIMEOUT_S) -> None:
    """Fill each row's compile_* fields (rows and problems in the same order, matched by name)."""
    by_name = {p.name: p for p in problems}
    for row in rows:
        problem = by_name.get(row.name)
        if problem is None:
            continue
        data = measure(problem, machine, timeout_s)
        if "error" in data:
            row.compile_message = str(data["error"])[:300]
            continue
        row.compile_time_s = float(data["seconds"])
        row.compile_host_ops = ", ".join(data.get("host_ops", []))
