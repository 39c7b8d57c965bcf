"""The candidate's sandbox: where candidate workers (`kegen.eval.sandboxed.cworker`) run, and their limits.

Workers are forked by a warm zygote (`kegen.eval.sandboxed.zygote`) that itself runs under bubblewrap when
`bwrap` is installed and works here:

    bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp
          --tmpfs /run --unshare-user --uid 65534 --gid 65534 --chdir / ... python -P -m ...zygote

that is: an unprivileged user id, new PID/network/IPC/UTS/mount namespaces (no network, no host
sockets, every process dies with the sandbox) and a read-only view of the rest. The candidate's
file arrives through a read-only "inbox" directory. A seccomp filter (`kegen.eval.sandboxed.seccomp`)
refuses new AF_UNIX sockets, so host unix sockets visible in the read-only view cannot be connected to.
The zygote never runs candidate code; each worker gets its own namespaces, private capped /tmp,
/dev/shm and /run and a locked-down process (`kegen.eval.sandboxed.isolate`; docs/THREAT_MODEL.md,
"Isolation between evaluations"). Limits: the evaluator polls the resident memory (plus the worker's
tmpfs usage) and the process count of the worker's whole process tree (and kills it over the limit),
RLIMIT_FSIZE, RLIMIT_CPU, no core dumps; the zygote is a child subreaper that kills whatever a worker
leaves behind. Without bwrap the same runs unsandboxed at the OS level (the result's details.sandbox
says so, with a warning): the evaluator's guarantees (own verdict, own time, own device) hold either
way, and the per-worker isolation holds where user namespaces are available.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.eval.sandboxed.seccomp import unix_socket_filter
from kegen.eval.sandboxed.zygote import code_roots
from kegen.proctree import descendants, process_table
from kegen.targets import GPU_TARGETS

START_TIMEOUT_S = 180.0
SANDBOX_INBOX = "/tmp/kegen-in"
NOBODY = 65534
TMPFS_BYTES = 64 * 1024 * 1024  # the zygote's own /tmp (workers get their own, see isolate.py)
WORKER_TMPFS = ("/tmp", "/dev/shm", "/run")  # each worker's private tmpfs: counted in its memory


@dataclass
class SandboxKind:
    name: str  # "bwrap" or "none"
    warning: str | None = None


_bwrap_ok: SandboxKind | None = None


def sandbox_kind() -> SandboxKind:
    """bwrap when it is installed and starts a sandbox here, else "none" with the reason."""
    global _bwrap_ok
    if _bwrap_ok is None:
        exe = shutil.which("bwrap")
        if exe is None:
            _bwrap_ok = SandboxKind(
                "none",
                "bubblewrap (bwrap) is not installed: the candidate runs without OS isolation "
                "(install it: apt-get install bubblewrap)",
            )
        else:
            try:
                probe = subprocess.run(
                    [*_bwrap_args(exe, None), "true"], capture_output=True, timeout=20, text=True
                )
                ok = probe.returncode == 0
                why = probe.stderr.strip()[-300:]
            except (OSError, subprocess.SubprocessError) as exc:
                ok, why = False, str(exc)
            _bwrap_ok = (
                SandboxKind("bwrap")
                if ok
                else SandboxKind("none", f"bwrap does not work here ({why}): no OS isolation")
            )
    return _bwrap_ok


GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/dri", "/dev/kfd")


def _gpu_devices() -> list[str]:
    """The GPU device nodes a GPU worker needs inside the sandbox's fresh /dev."""
    import glob

    return [p for pattern in GPU_DEVICE_GLOBS for p in sorted(glob.glob(pattern))]


PRIVATE_MOUNTS = ("/tmp", "/run")


def _code_paths_under_private_mounts() -> list[str]:
    """The worker's code roots (`zygote.code_roots`: the interpreter, its environment, kegen's own
    code, the assembler's folder) where they live under a directory the sandbox replaces by a
    private tmpfs (a checkout or venv in /tmp): bound back read-only, so the worker runs the same
    code. Only these directories come back, never the host's /tmp itself."""
    keep: set[str] = set()
    for raw in code_roots():
        try:
            path = Path(raw).resolve()
        except OSError:
            continue
        text = str(path)
        if not path.exists() or text in PRIVATE_MOUNTS:
            continue
        if any(text.startswith(m + "/") for m in PRIVATE_MOUNTS):
            keep.add(text)
    return sorted(p for p in keep if not any(p.startswith(q + "/") for q in keep if q != p))


def _bwrap_args(exe: str, inbox: Path | None, gpu: bool = False) -> list[str]:
    args = [
        exe,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(TMPFS_BYTES),
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/run",
        "--unshare-user",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "TRITON_CACHE_DIR",
        "/tmp/triton-cache",
        "--chdir",
        "/",
    ]
    for path in _code_paths_under_private_mounts():
        args += ["--ro-bind", path, path]
    if inbox is not None:
        args += ["--ro-bind", str(inbox), SANDBOX_INBOX]
    if gpu:
        for dev in _gpu_devices():
            args += ["--dev-bind", dev, dev]
    return args + ["--"]


# --- the worker's process tree ----------------------------------------------------------------


def _ns_pids(pid: int) -> list[int]:
    """`pid` in every PID namespace it is in, outermost first ([] when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def _ns_pid(pid: int) -> int | None:
    pids = _ns_pids(pid)
    return pids[-1] if pids else None


def _tmpfs_bytes(host_pid: int) -> int:
    """Bytes the worker holds in its private tmpfs mounts (RAM its resident size does not show)."""
    used = 0
    for mount in WORKER_TMPFS:
        try:
            st = os.statvfs(f"/proc/{host_pid}/root{mount}")
        except OSError:
            continue
        if st.f_blocks:  # a tmpfs of the worker's own (0 blocks: none there)
            used += (st.f_blocks - st.f_bfree) * st.f_frsize
    return used


class Worker:
    """One live candidate worker: its protocol socket and how to watch and stop it."""

    def __init__(self, zygote: _Zygote, sock: socket.socket, err_fd: int, msg: dict[str, Any]) -> None:
        self.zygote, self.sock, self.err_fd, self.pid = zygote, sock, err_fd, int(msg["pid"])
        self.host_pid = zygote.host_pid_of(self.pid)
        keeper = msg.get("keeper")
        self.keeper_host_pid = zygote.host_pid_of(int(keeper)) if isinstance(keeper, int) else None
        # what per-worker isolation could not set up (sentences; empty where all of it holds)
        self.isolation_lost: list[str] = [str(x) for x in msg.get("lost") or []]
        # /tmp, /dev/shm and /run are the worker's own tmpfs (counted in its memory), not the machine's
        self.private_mounts = bool(msg.get("private_mounts"))
        self.stderr = b""
        self.killed = False

    def returncode(self) -> int | None:
        self.zygote.poll()
        return self.zygote.returncodes.get(self.pid)

    def usage(self) -> tuple[float, int]:
        """(MiB, process count) of the worker and everything it started: resident memory plus
        what it holds in its private /tmp, /dev/shm and /run."""
        if self.host_pid is None:
            return 0.0, 0
        table = process_table()
        tree = [self.host_pid, *descendants(self.host_pid, table)]
        # orphans re-parented to the zygote belong to the worker too (not its keeper: trusted code
        # forked from the zygote, whose pages it shares)
        tree += [
            p for p in descendants(self.zygote.host_pid, table) if p not in tree and p != self.keeper_host_pid
        ]
        kib = sum(table.get(p, (0, 0))[1] for p in tree)
        tmpfs = _tmpfs_bytes(self.host_pid) / 2**20 if self.private_mounts else 0.0
        return kib / 1024 + tmpfs, len(tree)

    def read_stderr(self) -> None:
        while True:
            ready, _, _ = select.select([self.err_fd], [], [], 0)
            if not ready:
                return
            chunk = os.read(self.err_fd, 65536)
            if not chunk:
                return
            self.stderr = (self.stderr + chunk)[-8000:]

    def stderr_tail(self) -> str:
        self.read_stderr()
        return self.stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL the worker and everything under the zygote; wait for the zygote's report."""
        self.killed = True
        for _ in range(20):
            pids = descendants(self.zygote.host_pid)
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        deadline = time.monotonic() + 3.0
        while self.returncode() is None and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        if self.returncode() is None:
            self.kill()
        self.read_stderr()
        for closer in (self.sock.close, lambda: os.close(self.err_fd)):
            try:
                closer()
            except OSError:
                pass
        self.zygote.lock.release()
        release_fresh(self.zygote)


class _Zygote:
    """A sandboxed `python -m kegen.eval.sandboxed.zygote` and its control socket."""

    def __init__(self, env: dict[str, str]) -> None:
        self.kind = sandbox_kind()
        self.inbox = Path(tempfile.mkdtemp(prefix="kegen-inbox-"))
        os.chmod(self.inbox, 0o755)
        mine, theirs = socket.socketpair()
        # -P: no script directory or cwd on sys.path; cwd "/" (the zygote cleans sys.path too)
        cmd = [sys.executable, "-P", "-m", "kegen.eval.sandboxed.zygote", str(theirs.fileno())]
        pass_fds = [theirs.fileno()]
        seccomp_fd = None
        if self.kind.name == "bwrap":
            gpu = env.get("KEGEN_TARGET") in GPU_TARGETS
            prefix = _bwrap_args(shutil.which("bwrap") or "bwrap", self.inbox, gpu)
            program = unix_socket_filter()
            if program is not None:
                seccomp_fd, w = os.pipe()
                os.write(w, program)
                os.close(w)
                prefix[-1:-1] = ["--seccomp", str(seccomp_fd)]
                pass_fds.append(seccomp_fd)
            cmd = [*prefix, *cmd]
        full_env = _worker_env(env)
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isabs(p))
        full_env["KEGEN_SANDBOX_INBOX"] = SANDBOX_INBOX if self.kind.name == "bwrap" else str(self.inbox)
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=pass_fds,
            env=full_env,
            cwd="/",
            start_new_session=True,
        )
        theirs.close()
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        self.ctrl = mine
        self.lock = threading.Lock()
        self.buffer = b""
        self.returncodes: dict[int, int] = {}
        self.host_pid = self._find_host_pid()
        self.jobs = 0

    def _find_host_pid(self) -> int:
        if self.kind.name != "bwrap":
            return self.proc.pid
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for pid in descendants(self.proc.pid):
                if _ns_pid(pid) == 2 or (_ns_pid(pid) not in (None, 1) and pid != self.proc.pid):
                    return pid
            time.sleep(0.02)
        return self.proc.pid

    def host_pid_of(self, ns_pid: int) -> int | None:
        """The host pid of the zygote's descendant `ns_pid` (a pid in the zygote's namespace)."""
        if self.kind.name != "bwrap":
            return ns_pid
        depth = len(_ns_pids(self.host_pid)) - 1
        for _ in range(100):
            for pid in descendants(self.host_pid):
                pids = _ns_pids(pid)
                if depth >= 0 and len(pids) > depth and pids[depth] == ns_pid:
                    return pid
            time.sleep(0.01)
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def poll(self, timeout: float = 0.0) -> dict[str, Any] | None:
        """Read one control message if any (records return codes)."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.ctrl], [], [], timeout)
            if not ready:
                return None
            chunk = self.ctrl.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        if "returncode" in msg:
            self.returncodes[int(msg["pid"])] = int(msg["returncode"])
        return msg

    def start(self, job: dict[str, Any]) -> Worker:
        """Fork a worker; the caller holds `self.lock` (released by Worker.close)."""
        mine, theirs = socket.socketpair()
        err_r, err_w = os.pipe()
        try:
            self.ctrl.sendmsg(
                [(json.dumps(job) + "\n").encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_fd_array([theirs.fileno(), err_w])))],
            )
        finally:
            theirs.close()
            os.close(err_w)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = self.poll(0.2)
            if msg is not None and "returncode" not in msg:
                self.jobs += 1
                return Worker(self, mine, err_r, msg)
            if not self.alive():
                break
        mine.close()
        os.close(err_r)
        raise RuntimeError("the sandbox's zygote did not start a worker (is the sandbox usable here?)")

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.inbox, ignore_errors=True)


def _fd_array(fds: list[int]) -> Any:
    import array

    return array.array("i", fds)


def _worker_env(overrides: dict[str, str]) -> dict[str, str]:
    drop = ("http_proxy", "https_proxy", "all_proxy")
    env = {k: v for k, v in os.environ.items() if k.lower() not in drop and not k.startswith("KEGEN_MTIA")}
    env["no_proxy"] = env["NO_PROXY"] = "*"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


@dataclass
class _Pool:
    zygotes: dict[tuple[tuple[str, str], ...], list[_Zygote]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_pool = _Pool()


def worker_env(target: str) -> dict[str, str]:
    """The environment a worker for `target` gets (zygotes are pooled by it). The machine is not in
    it: each worker gets its machine as a value, in its init message."""
    env = {"KEGEN_TARGET": target}
    if target == "cpu":
        env["TRITON_INTERPRET"] = "1"
    return env


def prestart(env: dict[str, str]) -> None:
    """Start a pooled zygote for `env` in the background if none is alive (it imports torch and
    Triton while the evaluator does its own start-up)."""
    key = tuple(sorted(env.items()))
    with _pool.lock:
        if any(z.alive() for z in _pool.zygotes.get(key, [])):
            return
        _pool.zygotes.setdefault(key, []).append(_Zygote(env))


def acquire(env: dict[str, str], fresh: bool = False) -> _Zygote:
    """A free zygote for `env` (locked for the caller); `fresh` starts a new one used once."""
    key = tuple(sorted(env.items()))
    with _pool.lock:
        if not fresh:
            for z in _pool.zygotes.get(key, []):
                if z.alive() and z.lock.acquire(blocking=False):
                    return z
        z = _Zygote(env)
        z.lock.acquire()
        if not fresh:
            _pool.zygotes.setdefault(key, []).append(z)
        return z


def release_fresh(z: _Zygote) -> None:
    """Close `z` if it was started for one evaluation only (not pooled)."""
    with _pool.lock:
        pooled = any(z in zs for zs in _pool.zygotes.values())
    if not pooled:
        z.close()


def candidate_inbox_path(z: _Zygote, source: Path) -> tuple[Path, str]:
    """Copy `source` into the zygote's inbox; (host path, path as the worker sees it)."""
    job_dir = Path(tempfile.mkdtemp(prefix="job-", dir=z.inbox))
    os.chmod(job_dir, 0o755)
    target = job_dir / source.name
    shutil.copyfile(source, target)
    os.chmod(target, 0o644)
    inside = f"{SANDBOX_INBOX}/{job_dir.name}/{source.name}" if z.kind.name == "bwrap" else str(target)
    return target, inside


@atexit.register
def shutdown_zygotes() -> None:
    """Stop every zygote this process started."""
    with _pool.lock:
        for zs in _pool.zygotes.values():
            for z in zs:
                z.close()
        _pool.zygotes.clear()
