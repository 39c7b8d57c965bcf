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

import atexit
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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
            _UNSHARE_OK = (
                exe is not None
                and subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
            )
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


def _worker_env(env_overrides: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["no_proxy"] = env["NO_PROXY"] = "*"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(env_overrides or {})
    return env


def run_worker(
    request: dict[str, Any],
    *,
    timeout_s: float,
    memory_limit_mb: int,
    gpu: bool,
    isolate_network: bool = True,
    env_overrides: dict[str, str] | None = None,
    fresh_process: bool = False,
) -> WorkerOutcome:
    """Run `request` in a sandboxed worker; never raises for anything the candidate does.

    The worker is forked from a warm zygote (torch and Triton already imported) unless
    `fresh_process` is set or the zygote is busy or broken; then it is a fresh interpreter.
    """
    with tempfile.TemporaryDirectory(prefix="kegen-eval-") as tmp:
        req_path, res_path, err_path = (
            Path(tmp, "request.json"),
            Path(tmp, "result.json"),
            Path(tmp, "stderr"),
        )
        req = dict(request)
        use_netns = isolate_network and not gpu and network_namespace_available()
        req["network_isolation"] = "namespace" if use_netns else "python"
        req_path.write_text(json.dumps(req))
        job = {
            "request": str(req_path),
            "result": str(res_path),
            "stderr": str(err_path),
            "memory_limit_mb": memory_limit_mb,
            "cpu_limit_s": int(timeout_s) + 30,
            "limit_address_space": not gpu,
        }
        outcome: WorkerOutcome | None = None
        if not fresh_process:
            zygote = _zygote(use_netns, env_overrides or {})
            if zygote is not None and zygote.lock.acquire(blocking=False):
                try:
                    outcome = zygote.run(job, timeout_s, memory_limit_mb if gpu else None)
                finally:
                    zygote.lock.release()
        if outcome is None:
            outcome = _run_fresh(job, timeout_s, memory_limit_mb, gpu, use_netns, env_overrides)
        if res_path.exists() and not outcome.timed_out and not outcome.out_of_memory:
            try:
                outcome.result = json.loads(res_path.read_text())
            except json.JSONDecodeError:
                outcome.result = None
        outcome.stderr_tail = (
            err_path.read_bytes()[-4000:].decode("utf-8", "replace") if err_path.exists() else ""
        )
        return outcome


def _run_fresh(
    job: dict[str, Any],
    timeout_s: float,
    memory_limit_mb: int,
    gpu: bool,
    use_netns: bool,
    env_overrides: dict[str, str] | None,
) -> WorkerOutcome:
    cmd = [sys.executable, "-m", "kegen.eval.worker", job["request"], job["result"]]
    if use_netns:
        cmd = [shutil.which("unshare") or "unshare", "-rn", *cmd]
    start = time.monotonic()
    with open(job["stderr"], "wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdout=err,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=_worker_env(env_overrides),
            start_new_session=True,
            preexec_fn=_limits(memory_limit_mb, job["cpu_limit_s"], not gpu),
        )
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
        _kill_group(proc)  # on timeout, and leftovers the candidate may have spawned into the group
    return WorkerOutcome(None, timed_out, oom, proc.returncode, "", time.monotonic() - start)


class _Zygote:
    """A `python -m kegen.eval.zygote` process and its JSON-lines protocol."""

    START_TIMEOUT_S = 180.0

    def __init__(self, use_netns: bool, env_overrides: dict[str, str]) -> None:
        cmd = [sys.executable, "-m", "kegen.eval.zygote"]
        if use_netns:
            cmd = [shutil.which("unshare") or "unshare", "-rn", *cmd]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_worker_env(env_overrides),
            start_new_session=True,
        )
        self.lock = threading.Lock()
        self.buffer = b""
        self.returncodes: dict[int, int] = {}
        self.alive = True

    def _read_line(self, deadline: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.alive = False
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        if "returncode" in msg:
            self.returncodes[int(msg["pid"])] = int(msg["returncode"])
        return msg

    def run(self, job: dict[str, Any], timeout_s: float, rss_limit_mb: int | None) -> WorkerOutcome | None:
        """The outcome, or None if the zygote is broken (the caller falls back to a fresh process)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self.alive = False
            return None
        msg = self._read_line(time.monotonic() + self.START_TIMEOUT_S)
        while msg is not None and "returncode" in msg:
            msg = self._read_line(time.monotonic() + self.START_TIMEOUT_S)
        if msg is None:
            self.alive = False
            return None
        pid = int(msg["pid"])
        start = time.monotonic()
        timed_out = oom = False
        while pid not in self.returncodes:
            now = time.monotonic()
            if now - start > timeout_s:
                timed_out = True
                break
            if rss_limit_mb is not None and _rss_mb(pid) > rss_limit_mb:
                oom = True
                break
            if self._read_line(min(start + timeout_s, now + 0.5)) is None and not self.alive:
                return None
        _kill_pgid(pid)
        if timed_out or oom:
            deadline = time.monotonic() + KILL_GRACE_S + 3
            while pid not in self.returncodes and self._read_line(deadline) is not None:
                pass
        return WorkerOutcome(
            None, timed_out, oom, self.returncodes.pop(pid, None), "", time.monotonic() - start
        )

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_pgid(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_zygotes: dict[tuple[bool, tuple[tuple[str, str], ...]], _Zygote] = {}
_zygotes_lock = threading.Lock()


def _zygote(use_netns: bool, env_overrides: dict[str, str]) -> _Zygote | None:
    key = (use_netns, tuple(sorted(env_overrides.items())))
    with _zygotes_lock:
        z = _zygotes.get(key)
        if z is None or not z.alive or z.proc.poll() is not None:
            try:
                z = _Zygote(use_netns, env_overrides)
            except OSError:
                return None
            _zygotes[key] = z
        return z


@atexit.register
def shutdown_zygotes() -> None:
    """Stop every zygote this process started."""
    with _zygotes_lock:
        for z in _zygotes.values():
            z.close()
        _zygotes.clear()
