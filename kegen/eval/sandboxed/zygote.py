"""A warm process that forks one candidate worker per evaluation (`python -m kegen.eval.sandboxed.zygote FD`).

Importing torch and Triton costs seconds; the zygote pays it once. It runs inside the sandbox
(`kegen.eval.trusted.sandbox`), holds nothing the evaluator trusts, and stays single-threaded. Protocol on
the control socket FD: the evaluator sends a JSON line {"env", "cpu_limit_s", "fsize_mb"} with two
file descriptors attached (the worker's protocol socket and its stderr pipe); the zygote forks a
worker, answers {"pid": P} (P as seen in the sandbox's PID namespace) and, when it ends,
{"pid": P, "returncode": RC} (RC < 0: killed by signal -RC). The zygote is a child subreaper:
whatever a worker leaves behind (double-forked daemons included) is re-parented to it and killed
when the worker ends.
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

PREIMPORTS = (
    "torch",
    "torch.utils.flop_counter",
    "kegen.eval.sandboxed.cworker",
    "kegen.eval.sandboxed.runner",
    "kegen.eval.wire",
    "lowering.backend.device_client",
)
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


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


def _prctl(option: int, arg: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except Exception:  # not Linux
        pass


def _child(job: dict[str, Any], ctrl: socket.socket, proto_fd: int, err_fd: int) -> None:
    """In the forked worker: new session, stdio to the stderr pipe, limits, serve, exit."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
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
        os.environ.update({str(k): str(v) for k, v in (job.get("env") or {}).items()})
        from kegen.eval.sandboxed import cworker

        cworker.main(proto_fd)
    except BaseException:  # noqa: BLE001 - report anything, then die
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


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
    _preimport()
    ctrl = socket.socket(fileno=ctrl_fd)
    workers: set[int] = set()
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
                pid = os.fork()
                if pid == 0:
                    _child(job, ctrl, proto_fd, err_fd)
                os.close(proto_fd)
                os.close(err_fd)
                workers.add(pid)
                ctrl.sendall((json.dumps({"pid": pid}) + "\n").encode())
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in workers:
                workers.discard(pid)
                _kill_leftovers()
                rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                ctrl.sendall((json.dumps({"pid": pid, "returncode": rc}) + "\n").encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]))
