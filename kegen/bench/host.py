"""A description of the machine a bench ran on (so numbers from different hosts are not confused)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1024 * 1024), 1)
    except (OSError, ValueError):
        pass
    return None


def _version(module: str) -> str:
    try:
        mod = __import__(module)
        return str(getattr(mod, "__version__", "?"))
    except Exception:
        return "not installed"


def git_commit(repo: Path | None = None) -> str:
    """The checked-out commit (short hash, "+dirty" with uncommitted changes), or "unknown"."""
    cwd = repo or Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def describe_host() -> dict[str, Any]:
    """CPU, core count, memory, OS and the versions of the packages that shape the numbers."""
    from kegen import __version__

    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": _version("torch"),
        "triton": _version("triton"),
        "kegen": __version__,
        "commit": git_commit(),
    }


def host_line(host: dict[str, Any]) -> str:
    """One line for a history file: '2 cores Intel Xeon ..., 7.8 GiB, Linux 6.1, torch 2.13, triton 3.6'."""
    mem = f", {host['memory_gib']} GiB" if host.get("memory_gib") else ""
    return (f"{host.get('cores', '?')} cores {host.get('cpu', '?')}{mem}, {host.get('os', '?')}, "
            f"python {host.get('python', '?')}, torch {host.get('torch', '?')}, "
            f"triton {host.get('triton', '?')}")
