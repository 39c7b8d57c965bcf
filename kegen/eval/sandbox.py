"""Run one job in a fresh worker process: wall-clock timeout, memory limit, no network, JSON back.

The worker is `python -m kegen.eval.worker REQUEST.json RESULT.json` in its own process group
(killed as a group on timeout). Limits: RLIMIT_AS = memory limit on CPU targets (GPU drivers
reserve huge virtual ranges, so on GPU targets the parent polls the resident set instead), and
RLIMIT_CPU as a backstop to the wall clock. Network: the worker first tries a private network
namespace (`unshare -rn`, no interfaces but loopback); where user namespaces are unavailable it
falls back to blocking Python's socket module and clearing proxy variables, which a candidate
using raw syscalls (ctypes) could evade; the result records which (`details.network_isolation`).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KILL_GRACE_S = 2.0
POLL_S = 0.05


@dataclass
class WorkerOutcome:
    """What came back from a worker: its JSON result, or why there is none."""

    result: dict[str, Any] | None
    timed_out: bool = False
    out_of_memory: bool = False
    returncode: int | None = None
    stderr_tail: str = ""
    wall_time_s: float = 0.0


_UNSHARE_OK: bool | None = None


def network_namespace_available() -> bool:
    """True if `unshare -rn` works here (unprivileged user + network namespaces)."""
    global _UNSHARE_OK
    if _UNSHARE_OK is None:
        exe = shutil.which("unshare")
        try:
            _UNSHARE_OK = exe is not None and subprocess.run(
                [exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _UNSHARE_OK = False
    return _UNSHARE_OK


def _limits(memory_limit_mb: int, cpu_limit_s: int, limit_address_space: bool) -> Any:
    def apply() -> None:
        if limit_address_space:
            nbytes = memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def run_worker(request: dict[str, Any], *, timeout_s: float, memory_limit_mb: int, gpu: bool,
               isolate_network: bool = True, env_overrides: dict[str, str] | None = None) -> WorkerOutcome:
    """Run `request` in a fresh worker; never raises for anything the candidate does."""
    with tempfile.TemporaryDirectory(prefix="kegen-eval-") as tmp:
        req_path, res_path, err_path = Path(tmp, "request.json"), Path(tmp, "result.json"), Path(tmp, "stderr")
        req = dict(request)
        use_netns = isolate_network and not gpu and network_namespace_available()
        req["network_isolation"] = "namespace" if use_netns else "python"
        req_path.write_text(json.dumps(req))
        cmd = [sys.executable, "-m", "kegen.eval.worker", str(req_path), str(res_path)]
        if use_netns:
            cmd = [shutil.which("unshare") or "unshare", "-rn", *cmd]
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env["no_proxy"] = env["NO_PROXY"] = "*"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(env_overrides or {})
        start = time.monotonic()
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True,
                                    preexec_fn=_limits(memory_limit_mb, int(timeout_s) + 30, not gpu))
            timed_out = oom = False
            while proc.poll() is None:
                elapsed = time.monotonic() - start
                if elapsed > timeout_s:
                    timed_out = True
                    break
                if gpu and _rss_mb(proc.pid) > memory_limit_mb:
                    oom = True
                    break
                time.sleep(POLL_S if elapsed < 5 else 4 * POLL_S)
            if timed_out or oom:
                _kill_group(proc)
            else:
                _kill_group(proc)  # leftovers the candidate may have spawned into the group
        wall = time.monotonic() - start
        result = None
        if res_path.exists() and not timed_out and not oom:
            try:
                result = json.loads(res_path.read_text())
            except json.JSONDecodeError:
                result = None
        tail = err_path.read_bytes()[-4000:].decode("utf-8", "replace") if err_path.exists() else ""
        return WorkerOutcome(result, timed_out, oom, proc.returncode, tail, wall)
