"""The candidate's side of the out-of-process mtia device.

Under `kegen eval` the simulated chip and its memory do not live in the candidate's process: the
evaluator starts the candidate's worker with a socket to its device (`attach`), and the worker
holds `DeviceTensor`s (`lowering.backend.device_tensor`) -- shape, dtype, strides and a storage
handle in the device's memory -- never their bytes. Every launch becomes a request on the socket:
the kernel's ELF image, the grid, the scalar arguments and, per pointer argument, a storage handle
and byte offset. Allocations, fills, device copies and uploads of host tensors are queued and sent
ahead of the next launch or reply as one `device_ops` frame (no round trip). The device answers a
launch with its simulated time only (for Triton's benchmarker and autotuner; informational: the
evaluator reports the time its device measured). No request reads device memory back.

A host tensor passed to a kernel (a constant made in forward) is uploaded for that launch; the
device charges the upload at the machine's host-link bandwidth and refuses a kernel that writes
into it (allocate outputs with torch.empty / empty_like in forward: those are device tensors).

Without a device (a user running `kernel[grid](cpu_tensors)`, the lowering tests) the driver
simulates in-process (`lowering.backend.launch.SimulatorSession`).
"""

from __future__ import annotations

import ctypes
import socket
import threading
from dataclasses import dataclass
from typing import Any

import torch

from lowering.backend.device_tensor import DeviceStorage, DeviceTensor
from lowering.backend.device_wire import recv_frame, send_frame
from lowering.backend.launch import scalar_slot, storage_span

MAX_QUEUED_BYTES = 64 << 20  # uploads queued beyond this are sent at once


@dataclass
class RemoteResult:
    """What the device tells the candidate about one launch (LaunchResult-like: cycles, seconds)."""

    cycles: float
    seconds: float
    counters: Any = None


class DeviceError(RuntimeError):
    """The device refused or failed a request (the message says why)."""


class RemoteDevice:
    """A connection to the evaluator's device over an inherited socket (one per worker)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.RLock()
        self._ops: list[dict[str, Any]] = []
        self._blobs: list[Any] = []
        self._queued_bytes = 0
        self._frees: list[int] = []
        self._free_lock = threading.Lock()
        self._next_handle = 1

    # --- memory --------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceStorage:
        with self.lock:
            handle, self._next_handle = self._next_handle, self._next_handle + 1
            self._ops.append({"op": "alloc", "h": handle, "nbytes": int(nbytes)})
        return DeviceStorage(handle, nbytes, self)

    def free(self, handle: int) -> None:
        """Queue a free (called from finalizers at any time: never touches the socket)."""
        with self._free_lock:
            self._frees.append(int(handle))

    def fill(self, dst: DeviceTensor, value: float | int | bool) -> None:
        value = bool(value) if isinstance(value, bool) else value
        if isinstance(value, float) and value != value:
            value_json: Any = "nan"
        elif isinstance(value, float) and value in (float("inf"), float("-inf")):
            value_json = "inf" if value > 0 else "-inf"
        else:
            value_json = value
        with self.lock:
            self._ops.append({"op": "fill", "dst": dst.describe(), "value": value_json})

    def copy(self, dst: DeviceTensor, src: DeviceTensor) -> None:
        with self.lock:
            self._ops.append({"op": "copy", "dst": dst.describe(), "src": src.describe()})

    def upload(self, dst: DeviceTensor, host: torch.Tensor) -> None:
        """Write a host tensor's values into `dst` (same shape; converted to dst's dtype)."""
        data = host.detach().to(dst.dtype).contiguous()
        blob = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        with self.lock:
            self._ops.append({"op": "upload", "dst": dst.describe(), "blob": len(self._blobs)})
            self._blobs.append(blob)
            self._queued_bytes += len(blob)
            if self._queued_bytes > MAX_QUEUED_BYTES:
                self.flush()

    def to_device(self, host: torch.Tensor) -> DeviceTensor:
        """A device copy of a host tensor (contiguous)."""
        from lowering.backend.device_tensor import new_device_tensor

        out = new_device_tensor(self, host.shape, host.dtype)
        self.upload(out, host)
        return out

    def tensor(self, meta: dict[str, Any]) -> DeviceTensor:
        """A DeviceTensor over a storage the evaluator placed (an input; never freed from here):
        `meta` = {"dev", "nbytes", "offset", "shape", "strides", "dtype"} as the device sent it."""
        dtype = getattr(torch, str(meta.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            raise DeviceError(f"the device sent a tensor of unknown dtype {meta.get('dtype')!r}")
        storage = DeviceStorage(int(meta["dev"]), int(meta["nbytes"]), self, owned=False)
        return DeviceTensor.on_storage(storage, meta["shape"], meta["strides"], int(meta["offset"]), dtype)

    def flush(self) -> None:
        """Send the queued device operations (and frees) as one frame; no reply."""
        with self.lock:
            with self._free_lock:
                frees, self._frees = self._frees, []
            ops = self._ops + [{"op": "free", "h": h} for h in frees]
            if not ops:
                return
            blobs = self._blobs
            self._ops, self._blobs, self._queued_bytes = [], [], 0
            send_frame(self.sock, {"op": "device_ops", "ops": ops}, blobs)

    # --- launches -------------------------------------------------------------------------------
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
        slots, host_blobs = _launch_slots(args, arg_types)
        header = {
            "op": "launch",
            "name": fn.name,
            "grid": list(grid),
            "arg_types": list(arg_types),
            "slots": slots,
            "dual_core": bool(dual_core),
            "blocked": bool(blocked),
            "sram_mode": str(sram_mode),
            "tags": list(tags),  # the kernel's command tags -> source lines (profiles only)
        }
        with self.lock:
            self.flush()
            send_frame(self.sock, header, [fn.elf, *host_blobs])
            reply, _ = recv_frame(self.sock)
        if reply.get("op") != "launched":
            raise DeviceError(str(reply.get("error") or f"unexpected reply from the mtia device: {reply}"))
        return RemoteResult(float(reply.get("cycles", 0.0)), float(reply.get("seconds", 0.0)))


def _launch_slots(args: list[Any], arg_types: list[str]) -> tuple[list[list[Any]], list[bytes]]:
    """Per runtime argument: ["dptr", handle, byte offset] for a device tensor, ["host", blob, byte
    offset] for a host tensor (its storage's bytes are uploaded), ["null"] or ["scalar", slot]."""
    slots: list[list[Any]] = []
    blobs: list[bytes] = []
    host_index: dict[int, int] = {}
    for value, ty in zip(args, arg_types, strict=True):
        if not ty.startswith("*"):
            slots.append(["scalar", scalar_slot(value, ty)])
        elif value is None:
            slots.append(["null"])
        elif isinstance(value, DeviceTensor):
            slots.append(["dptr", value.device_handle, value.device_byte_offset])
        elif isinstance(value, torch.Tensor):
            if value.device.type != "cpu":
                raise ValueError(f"mtia kernels take mtia device tensors; got a tensor on {value.device}")
            host, nbytes = storage_span(value)
            if host not in host_index:
                host_index[host] = len(blobs)
                blobs.append(ctypes.string_at(host, nbytes) if nbytes else b"")
            slots.append(["host", host_index[host], int(value.data_ptr()) - host])
        else:
            raise TypeError(f"pointer argument of type {ty} must be a torch tensor, got {type(value)}")
    return slots, blobs


_device: RemoteDevice | None = None


def remote_device() -> RemoteDevice | None:
    """The evaluator's device if this process was attached to one, else None."""
    return _device


def attach(sock: socket.socket) -> RemoteDevice:
    """Use `sock` as this process's device (the evaluation worker calls this at start-up)."""
    global _device
    _device = RemoteDevice(sock)
    return _device
