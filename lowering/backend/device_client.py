"""The candidate's side of the out-of-process mtia device.

Under `kegen eval` the simulated chip does not live in the candidate's process: the evaluator
starts the candidate's worker with the environment variable `KEGEN_MTIA_DEVICE_FD` naming an
inherited socket, and every launch becomes a request on it — the kernel's ELF image, the grid,
the scalar arguments and the bytes of every storage a pointer argument points into. The device
(owned by the evaluator) runs the kernel on its own simulator, with its own machine description
and clock, and answers with the storages' bytes afterwards; this module copies them back into
the tensors. The reply also carries the launch's simulated time, for Triton's benchmarker and
autotuner — informational only: the evaluator reports the time its device measured.

Without that variable (a user running `kernel[grid](cpu_tensors)`, the lowering tests) the driver
simulates in-process (`lowering.backend.launch.SimulatorSession`).
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from lowering.backend.device_wire import recv_frame, send_frame
from lowering.backend.launch import PackedLaunch, pack_launch, write_back

ENV_FD = "KEGEN_MTIA_DEVICE_FD"


@dataclass
class RemoteResult:
    """What the device tells the candidate about one launch (LaunchResult-like: cycles, seconds)."""

    cycles: float
    seconds: float
    counters: Any = None


class DeviceError(RuntimeError):
    """The device refused or failed a launch (the message says why)."""


class RemoteDevice:
    """A connection to the evaluator's device over an inherited socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()

    def launch(
        self,
        fn: Any,
        grid: tuple[int, int, int],
        args: list[Any],
        arg_types: list[str],
        *,
        dual_core: bool = False,
        blocked: bool = False,
        sram_mode: str = "cache",
        tags: tuple[str, ...] = (),
    ) -> RemoteResult:
        packed = pack_launch(args, arg_types, copy=False)  # views of the storages: sent, not copied
        header = {
            "op": "launch",
            "name": fn.name,
            "grid": list(grid),
            "arg_types": list(arg_types),
            "slots": [list(s) for s in packed.slots],
            "keys": packed.keys,
            "dual_core": bool(dual_core),
            "blocked": bool(blocked),
            "sram_mode": str(sram_mode),
            "tags": list(tags),  # the kernel's command tags -> source lines (profiles only)
        }
        with self.lock:
            send_frame(self.sock, header, [fn.elf, *packed.data])
            reply, blobs = recv_frame(self.sock, into=lambda head, i, n: _storage_for(packed, head, i, n))
        if reply.get("op") != "launched":
            raise DeviceError(str(reply.get("error") or f"unexpected reply from the mtia device: {reply}"))
        changed = reply.get("changed") or []
        if len(changed) != len(packed.keys):
            raise DeviceError("the mtia device answered for a different number of storages")
        after: list[Any] = []
        it = iter(blobs)
        for flag, view in zip(changed, packed.data, strict=True):
            blob = next(it) if flag else None
            # a blob received straight into its storage is there already
            after.append(None if blob is not None and blob is view else blob)
        write_back(packed, after)
        return RemoteResult(float(reply.get("cycles", 0.0)), float(reply.get("seconds", 0.0)))


def _storage_for(packed: PackedLaunch, header: dict[str, Any], i: int, nbytes: int) -> memoryview | None:
    """Where reply blob `i` goes: the memory of the i-th changed storage, when the sizes agree."""
    changed = header.get("changed")
    if header.get("op") != "launched" or not isinstance(changed, list) or len(changed) != len(packed.data):
        return None
    owners = [j for j, flag in enumerate(changed) if flag]
    if i >= len(owners):
        return None
    view = packed.data[owners[i]]
    return view if isinstance(view, memoryview) and view.nbytes == nbytes else None


_device: RemoteDevice | None = None
_checked = False


def remote_device() -> RemoteDevice | None:
    """The evaluator's device if this process was started with one (`KEGEN_MTIA_DEVICE_FD`), else None."""
    global _device, _checked
    if not _checked:
        _checked = True
        fd = os.environ.get(ENV_FD)
        if fd:
            _device = RemoteDevice(socket.socket(fileno=int(fd)))
    return _device


def attach(sock: socket.socket) -> RemoteDevice:
    """Use `sock` as this process's device (the evaluation worker calls this at start-up)."""
    global _device, _checked
    _device, _checked = RemoteDevice(sock), True
    return _device
