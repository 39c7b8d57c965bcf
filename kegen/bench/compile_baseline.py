"""torch.compile on the simulated MTIA as a bench baseline: each problem's compile time (simulated),
so the report reads like KernelEvolve's (speedup over the compiler, not only over a seed).

Each problem is compiled in its own process (`python -m kegen.inductor.baseline`), so a compiler
failure or a hang costs that problem's column only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kegen.bench.results import ProblemResult
from kegen.suites import SuiteProblem

TIMEOUT_S = 600.0


def measure(problem: SuiteProblem, machine: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The compile baseline of one problem as plain data ({"seconds", "host_ops", ...} or {"error"})."""
    cmd = [sys.executable, "-m", "kegen.inductor.baseline", str(problem.problem_path), "--machine", machine]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"torch.compile on {machine} took over {timeout_s:g} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"torch.compile baseline failed: {tail}"}
    data: dict[str, Any] = json.loads(lines[-1])
    return data


def add_compile_baselines(rows: list[ProblemResult], problems: list[SuiteProblem], machine: str) -> None:
    """Fill each row's compile_* fields (rows and problems in the same order, matched by name)."""
    by_name = {p.name: p for p in problems}
    for row in rows:
        problem = by_name.get(row.name)
        if problem is None:
            continue
        data = measure(problem, machine)
        if "error" in data:
            row.compile_message = str(data["error"])[:300]
            continue
        row.compile_time_s = float(data["seconds"])
        row.compile_host_ops = ", ".join(data.get("host_ops", []))
