"""A warm process that forks one sandboxed worker per evaluation (`python -m kegen.eval.zygote`).

Importing torch and Triton costs seconds; the zygote pays it once. It stays single-threaded and never
touches a GPU, so forking it is safe. Protocol (JSON lines): the parent writes
{"request", "result", "stderr", "memory_limit_mb", "cpu_limit_s", "limit_address_space"}; the zygote
answers {"pid": P} at once and {"pid": P, "returncode": RC} when that worker ends (RC < 0: killed by
signal -RC). Each worker is a session leader, so the parent can kill its whole process group.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
from typing import Any

PREIMPORTS = ("torch", "torch.utils.flop_counter", "kegen.eval.harness", "kegen.eval.runner")


def _preimport() -> None:
    import importlib

    for name in PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # pragma: no cover - optional pieces
            pass
    from kegen.eval.runner import SNAPSHOT_PREIMPORTS

    for name in SNAPSHOT_PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # the simulator is not installed on GPU machines
            pass


def _child(job: dict[str, Any], proto_in: int, proto_out: int) -> None:
    """In the forked worker: new session, limits, stdio to the stderr file, run, exit."""
    code = 1
    try:
        _die_with_parent()
        os.setsid()
        os.close(proto_in)
        os.close(proto_out)
        fd = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        if job.get("limit_address_space"):
            nbytes = int(job["memory_limit_mb"]) * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
        cpu = int(job["cpu_limit_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        from kegen.eval import worker

        code = worker.main([job["request"], job["result"]])
    except BaseException:  # noqa: BLE001 - report anything, then die
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker if the zygote dies (no orphaned candidates)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the zygote's own clean-up still applies
        pass


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def serve() -> None:
    _preimport()
    proto_in, proto_out = sys.stdin.fileno(), sys.stdout.fileno()
    out = os.fdopen(os.dup(proto_out), "w", buffering=1)
    buffer = b""
    live: set[int] = set()
    while True:
        ready, _, _ = select.select([proto_in], [], [], 0.05)
        if ready:
            chunk = os.read(proto_in, 65536)
            if not chunk:
                _kill_all(live)  # the parent went away: take its workers with us
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                job = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(job, proto_in, proto_out)
                live.add(pid)
                out.write(json.dumps({"pid": pid}) + "\n")
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            live.discard(pid)
            rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            out.write(json.dumps({"pid": pid, "returncode": rc}) + "\n")


if __name__ == "__main__":
    serve()
