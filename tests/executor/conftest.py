"""Executor tests: workers that are not started by this process (Ray's, `kegen evolve`'s) find the
task modules (`tests.executor.executor_tasks`, `tests.search.fake_eval`) through PYTHONPATH = the
repository root."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(HERE.parents[1])] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def ray_cluster():
    """A real Ray cluster on 127.0.0.1: a head and one worker node, one CPU each; its address.
    Stopped by killing the process groups of the `ray start` commands (never `ray stop`, which
    would stop every Ray on the machine)."""
    pytest.importorskip("ray")
    ray_bin = Path(sys.executable).with_name("ray")
    tmp = tempfile.mkdtemp(prefix="kray")  # short: Ray's socket paths must fit in 107 bytes
    port = _free_port()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--num-gpus=0", "--disable-usage-stats"]
    commands = [
        [str(ray_bin), "start", "--head", f"--port={port}", f"--temp-dir={tmp}", "--include-dashboard=false",
         *common],
        [str(ray_bin), "start", f"--address=127.0.0.1:{port}", *common],
    ]
    groups: list[int] = []
    try:
        for cmd in commands:
            proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            groups.append(proc.pid)
            out, _ = proc.communicate(timeout=240)
            if proc.returncode != 0:
                pytest.fail(f"{' '.join(cmd)} failed:\n{out.decode()[-3000:]}")
        yield f"127.0.0.1:{port}"
    finally:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(tmp, ignore_errors=True)
