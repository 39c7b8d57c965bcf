"""A warm process that forks one candidate worker per evaluation.

    python -P -m kegen.eval.sandboxed.zygote FD

Importing torch and Triton costs seconds; the zygote pays it once. It runs inside the sandbox
(`kegen.eval.trusted.sandbox`), holds nothing the evaluator trusts, stays single-threaded and
**never runs candidate code**: it is the clean template every worker (a candidate's or a seed
baseline's) is forked from. It imports everything a worker needs before the first job (the lark
parser of the lowering built, no cache file read), runs with cwd "/" and a sys.path without ''
or any writable directory, and is not dumpable (no ptrace, no /proc/<pid>/mem of it).

Protocol on the control socket FD: the evaluator sends a JSON line {"env", "cpu_limit_s",
"fsize_mb"} with two file descriptors attached (the worker's protocol socket and its stderr pipe);
the zygote forks a keeper K, which isolates itself (`kegen.eval.sandboxed.isolate.enter`: new
namespaces, private capped /tmp, /dev/shm and /run, the rest read-only) and forks the worker W,
pid 1 of its own PID namespace; W locks itself down (`isolate.lock_down`: seccomp, no
capabilities, not dumpable) and serves. The zygote answers {"pid": P, "keeper": K, "lost": [...]}
(P: W's pid as seen in the zygote's PID namespace; lost: what isolation could not be set up) and,
when W ends, {"pid": P, "returncode": RC} (RC < 0: killed by signal -RC). The zygote is a child
subreaper: whatever escapes is re-parented to it and killed when the worker ends.
"""

from __future__ import annotations

import array
import json
import os
import resource
import select
import signal
import socket
import sys
from typing import Any

from kegen.targets import GPU_TARGETS

PREIMPORTS = (
    "torch",
    "torch.utils.flop_counter",
    "kegen.eval.sandboxed.cworker",
    "kegen.eval.sandboxed.runner",
    "kegen.eval.sandboxed.isolate",
    "kegen.eval.sandboxed.seccomp",
    "kegen.eval.sandboxed.device_model",
    "kegen.eval.sandboxed.worker",
    "kegen.eval.wire",
    "kegen.proctree",
    "lowering.backend.device_client",
    "lark",
    "llvmlite",
    "llvmlite.binding",
    "lowering.ttir.parser",
    # what the first compile and launch import (read-only code: this is start-up time only)
    "kegen.settings",
    "triton.compiler.code_generator",
    "triton.language.extra.libdevice",
    "triton.tools.tensor_descriptor",
)
PREIMPORT_PACKAGES = ("lowering", "mtia_sim")  # mtia: every module (~0.1 s), compiler and simulator
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PRIVATE_PREFIXES = ("/tmp", "/dev/shm", "/run", "/var/tmp")
TMP_MB = 512  # each worker's /tmp (tmpfs, counted in its memory by the evaluator)
SHM_MB = 256  # each worker's /dev/shm


def _preimport() -> None:
    import importlib

    for name in PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # pragma: no cover - optional pieces
            pass
    from kegen.eval.sandboxed.runner import SNAPSHOT_PREIMPORTS

    for name in SNAPSHOT_PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # the simulator is not installed on GPU machines
            pass
    import pkgutil

    for package in PREIMPORT_PACKAGES if os.environ.get("KEGEN_TARGET") == "mtia" else ():
        try:
            path = importlib.import_module(package).__path__
        except Exception:  # the simulator is not installed on GPU machines
            continue
        for info in pkgutil.walk_packages(path, package + "."):
            try:
                importlib.import_module(info.name)
            except Exception:  # pragma: no cover - an optional piece
                pass
    try:  # the lowering's parser, built here once (lark's grammar analysis), from no cache file
        from lowering.ttir.parser import ttir_parser

        ttir_parser()
    except Exception:  # pragma: no cover - lowering absent
        pass


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def code_roots() -> set[str]:
    """Where the code a worker runs lives: the interpreter's prefixes, kegen's checkout, every
    `sys.path` entry and the folder of `$KEGEN_LLVM_MC` (the assembler the mtia lowering runs, with
    its libraries when carried onto a bare host). The sandbox binds back those under its private
    mounts (here per worker, and `kegen.eval.trusted.sandbox` for the zygote)."""
    import kegen

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(kegen.__file__))}
    found.update(p for p in sys.path if p)
    assembler = os.environ.get("KEGEN_LLVM_MC")
    if assembler:  # without it every lowering in the worker fails: "KEGEN_LLVM_MC=... is not a file"
        found.add(os.path.dirname(os.path.abspath(assembler)))
    return found


def code_paths_to_keep() -> list[str]:
    """Code the worker must still read that lives under a directory each worker gets privately
    (a checkout or venv under /tmp, a carried assembler: `code_roots`), plus the candidate inbox:
    bound back read-only per worker."""
    found = code_roots()
    inbox = os.environ.get("KEGEN_SANDBOX_INBOX")
    if inbox:
        found.add(inbox)
    keep = {os.path.realpath(p) for p in found if os.path.isabs(p)}
    keep = {
        p for p in keep if _under(p, PRIVATE_PREFIXES) and p not in PRIVATE_PREFIXES and os.path.exists(p)
    }
    return sorted(p for p in keep if not any(p.startswith(q + "/") for q in keep))


def clean_sys_path(keep: list[str]) -> None:
    """No '' (cwd), no relative entry and no directory a worker can write on sys.path."""
    sys.path[:] = [
        p
        for p in sys.path
        if p
        and os.path.isabs(p)
        and (not _under(p, PRIVATE_PREFIXES) or _under(os.path.realpath(p), tuple(keep)))
    ]


def _prctl(option: int, arg: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except Exception:  # not Linux
        pass


GPU_LOST = (
    "GPU target: no per-worker namespaces or seccomp filter (the GPU driver needs the host's device "
    "files and calls; CUDA fails under them on the H200 host): isolate GPU evaluations per machine "
    "(docs/THREAT_MODEL.md)"
)


def _gpu_target() -> bool:
    return os.environ.get("KEGEN_TARGET") in GPU_TARGETS


def _keeper(
    job: dict[str, Any], ctrl: socket.socket, proto_fd: int, err_fd: int, report: int, keep: list[str]
) -> None:
    """K: isolate, fork W, report W's pid and what isolation lost, wait for W and exit as it did."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        ctrl.close()
        os.dup2(err_fd, 1)
        os.dup2(err_fd, 2)
        os.close(err_fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        cpu = int(job.get("cpu_limit_s", 330))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = int(job.get("fsize_mb", 1024)) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        from kegen.eval.sandboxed import isolate

        if _gpu_target():  # CUDA/ROCm must reach the host's driver: no per-worker namespaces (H200, gVisor)
            lost, own_pid_ns = [GPU_LOST], False
        else:
            isolate.set_dumpable(True)  # to write its own uid_map; W does not exist yet
            try:
                lost = isolate.enter(TMP_MB << 20, SHM_MB << 20, keep)
                own_pid_ns = True
            except OSError as exc:
                why = f"no namespaces per worker ({exc}): workers share /tmp and /dev/shm"
                lost, own_pid_ns = [why], False
        isolate.set_dumpable(False)
        pid = os.fork()
        if pid == 0:
            os.close(report)
            _worker(job, proto_fd, own_pid_ns, lost)
        os.close(proto_fd)
        os.write(report, json.dumps({"pid": pid, "lost": lost, "private_mounts": own_pid_ns}).encode())
        os.close(report)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.WEXITSTATUS(status))
    except BaseException:  # noqa: BLE001 - report anything, then die
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _worker(job: dict[str, Any], proto_fd: int, own_pid_ns: bool, lost: list[str]) -> None:
    """W: new session, locked down, serve, exit. Candidate code runs only after `lock_down`."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        from kegen.eval.sandboxed import isolate

        lost.extend(isolate.lock_down(new_proc=own_pid_ns, seccomp=not _gpu_target()))
        os.environ.update({str(k): str(v) for k, v in (job.get("env") or {}).items()})
        from kegen.eval.sandboxed import cworker

        cworker.main(proto_fd)
    except BaseException:  # noqa: BLE001 - report anything, then die
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _spawn(
    job: dict[str, Any], ctrl: socket.socket, proto_fd: int, err_fd: int, keep: list[str]
) -> tuple[int, dict[str, Any]]:
    """Fork K (which forks W); (K's pid, K's report {"pid": W, "lost": [...]})."""
    r, w = os.pipe()
    keeper = os.fork()
    if keeper == 0:
        os.close(r)
        _keeper(job, ctrl, proto_fd, err_fd, w, keep)
    os.close(w)
    os.close(proto_fd)
    os.close(err_fd)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    try:
        report: dict[str, Any] = json.loads(data)
    except ValueError:
        report = {"pid": keeper, "lost": ["the worker's keeper failed"]}
    return keeper, report


def _children() -> list[int]:
    from kegen.proctree import children_of

    return children_of(os.getpid())


def _kill_leftovers() -> None:
    """SIGKILL every remaining child (workers' orphans are re-parented here) until none is left."""
    for _ in range(50):
        kids = _children()
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break


def serve(ctrl_fd: int) -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    from kegen.eval.sandboxed import isolate

    isolate.set_dumpable(False)
    os.chdir("/")
    keep = code_paths_to_keep()
    clean_sys_path(keep)
    _preimport()
    ctrl = socket.socket(fileno=ctrl_fd)
    keepers: dict[int, int] = {}  # K's pid -> W's pid
    buffer = b""
    fds: list[int] = []
    while True:
        ready, _, _ = select.select([ctrl], [], [], 0.05)
        if ready:
            msg, anc, _, _ = ctrl.recvmsg(65536, socket.CMSG_SPACE(4 * array.array("i").itemsize))
            if not msg:
                break  # the evaluator went away: the sandbox dies with us
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(data[: len(data) - len(data) % got.itemsize])
                    fds.extend(got)
            buffer += msg
            while b"\n" in buffer and len(fds) >= 2:
                line, buffer = buffer.split(b"\n", 1)
                job = json.loads(line)
                proto_fd, err_fd = fds[0], fds[1]
                del fds[:2]
                keeper, report = _spawn(job, ctrl, proto_fd, err_fd, keep)
                keepers[keeper] = int(report["pid"])
                answer = {
                    "pid": int(report["pid"]),
                    "keeper": keeper,
                    "lost": report.get("lost") or [],
                    "private_mounts": bool(report.get("private_mounts")),
                }
                ctrl.sendall((json.dumps(answer) + "\n").encode())
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in keepers:
                worker = keepers.pop(pid)
                _kill_leftovers()
                rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                ctrl.sendall((json.dumps({"pid": worker, "returncode": rc}) + "\n").encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]))
