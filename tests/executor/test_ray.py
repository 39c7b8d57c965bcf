"""The Ray cases (ray_cases.py) in a private network namespace that has loopback only, so the
local cluster cannot use any address but 127.0.0.1. Skipped where Ray is not installed (CI
installs kegen[ray]) or no network namespace can be made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
HERE = Path(__file__).parent


def _unshare() -> list[str] | None:
    exe = shutil.which("unshare")
    if exe is None:
        return None
    for flags in (["-n"], ["-rn"]):  # root: a network namespace; others: with a user namespace
        if subprocess.run([exe, *flags, "true"], capture_output=True).returncode == 0:
            return [exe, *flags]
    return None


@pytest.mark.slow
def test_ray_cases_on_a_loopback_only_network():
    unshare = _unshare()
    if unshare is None:
        pytest.skip("cannot make a network namespace here (unshare -n / -rn)")
    script = (f"ip link set lo up 2>/dev/null; exec {sys.executable} -m pytest -q -p no:cacheprovider "
              f"-o addopts='' {HERE / 'ray_cases.py'}")
    env = dict(os.environ, KEGEN_RAY_NETNS="1", RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.run([*unshare, "sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=900, cwd=HERE.parents[1])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "5 passed" in out, out[-3000:]
