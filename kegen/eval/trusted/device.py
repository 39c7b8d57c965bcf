"""The simulated MTIA chip as a device outside the candidate's process (owned by the evaluator).

The device holds the memory (`DeviceMemory`): the evaluator places each call's inputs there and
reads the outputs from there; the candidate's worker only ever names storages by handle. The
worker's Triton driver (`lowering.backend.device_client`) sends each launch as plain data -- ELF
image, grid, scalar slots, and per pointer argument a storage handle and byte offset (or the bytes
of a host tensor to upload) -- and queued memory operations (alloc, free, fill, device copy,
upload) as `device_ops` frames. This device runs launches on its own simulator, built from the
evaluator's machine description, never the candidate's, and answers with the simulated time only.

Per call window it records the launches (time, counters, source tags) and charges device-side
data movement the candidate asked for: uploads at the machine's host-link bandwidth, fills and
copies at its DRAM bandwidth, each with its fixed cost.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kegen.eval.trusted.device_memory import DeviceMemory, DeviceRequestError

if TYPE_CHECKING:  # the simulator (kegen[mtia]) is imported only when a device is made
    from lowering.backend.launch import LaunchRecord

__all__ = ["CallRecord", "DeviceRequestError", "DeviceStats", "MtiaDevice", "Transfer"]

MAX_PROGRAMS = 1 << 22  # grid points per launch


@dataclass(frozen=True)
class Transfer:
    """Device-side data movement charged to a call: kind (upload/copy/fill), bytes, seconds."""

    kind: str
    nbytes: int
    seconds: float


@dataclass
class CallRecord:
    """The launches and transfers of one call of the candidate's forward, as the device saw them."""

    launches: list[LaunchRecord] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    host_s: float = 0.0  # evaluator wall time spent serving the worker

    @property
    def launch_seconds(self) -> float:
        return sum(float(rec.result.seconds) for rec in self.launches)

    @property
    def transfer_seconds(self) -> float:
        return sum(t.seconds for t in self.transfers)

    @property
    def seconds(self) -> float:
        return self.launch_seconds + self.transfer_seconds

    def transfer_summary(self) -> dict[str, dict[str, float]]:
        """The transfers by kind: count, bytes and charged seconds (`details.transfers`)."""
        out: dict[str, dict[str, float]] = {}
        for t in self.transfers:
            row = out.setdefault(t.kind, {"count": 0, "bytes": 0, "seconds": 0.0})
            row["count"] += 1
            row["bytes"] += t.nbytes
            row["seconds"] += t.seconds
        return out


@dataclass
class DeviceStats:
    """What the device did for the evaluator (cumulative; `delta` gives one evaluation's share)."""

    launches: int = 0  # launch requests served
    device_ops: int = 0  # memory operations served (alloc, free, fill, copy, upload)
    bytes_in: int = 0  # host bytes received (uploads, host tensors at launches)
    serve_s: float = 0.0  # wall seconds serving requests (copies, simulation)

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _int_list(value: Any, n: int | None, what: str) -> list[int]:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        raise DeviceRequestError(f"{what} must be a list of {n or 'some'} integers")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise DeviceRequestError(f"{what} must hold integers")
    return value


def _fill_value(raw: Any) -> float | int | bool:
    if isinstance(raw, bool | int | float):
        return raw
    if raw in ("nan", "inf", "-inf"):
        return float(raw)
    raise DeviceRequestError(f"a fill value must be a number, got {raw!r}")


class MtiaDevice:
    """One simulated chip of the evaluator; serves one worker session at a time."""

    def __init__(self, machine: str, *, simulate: bool = True) -> None:
        from mtia_sim.machine import load_machine

        self.machine = machine
        self.description = load_machine(machine)
        if simulate:
            from lowering.backend.launch import SimulatorSession

            self.session = SimulatorSession(machine)
        self.memory = DeviceMemory(0)
        self.call: CallRecord | None = None
        self.pending_error: str | None = None  # a failed request outside a call (construction)
        self.outside_calls = 0  # launches requested while no call was in progress (init, warm-up)
        self.stats = DeviceStats()

    def snapshot(self) -> dict[str, Any]:
        """The device's and its simulator's counters now (subtract two snapshots for a span)."""
        session = getattr(self, "session", None)
        sim = session.stats.to_dict() if session is not None else {}
        return {**self.stats.to_dict(), "simulator": sim}

    # --- sessions and calls ------------------------------------------------------------------------
    def open(self, limit_bytes: int) -> None:
        """A fresh, empty memory for a new worker session (nothing of an earlier one survives)."""
        self.memory = DeviceMemory(limit_bytes)
        self.call, self.pending_error = None, None

    def close(self) -> None:
        self.memory = DeviceMemory(0)
        self.call, self.pending_error = None, None

    def begin_call(self) -> None:
        self.call = CallRecord()

    def end_call(self) -> CallRecord:
        call, self.call = self.call or CallRecord(), None
        return call

    # --- requests ----------------------------------------------------------------------------------
    def handle(
        self, header: dict[str, Any], blobs: list[bytearray]
    ) -> tuple[dict[str, Any], list[Any]] | None:
        """Serve one request: a `launch` gets a reply; `device_ops` get none (an error in them is
        recorded and answers the next launch). Errors never raise."""
        t0 = time.monotonic()
        try:
            if header.get("op") == "device_ops":
                self._device_ops(header, blobs)
                return None
            if self.call is not None and self.call.errors:
                raise DeviceRequestError(self.call.errors[0])
            return self._launch(header, blobs)
        except Exception as exc:  # the candidate's kernel failed on the device, or the request is bad
            msg = f"{type(exc).__name__}: {str(exc)[:1500]}"
            if self.call is not None and msg not in self.call.errors:
                self.call.errors.append(msg)
            elif self.call is None:
                self.pending_error = msg
            if header.get("op") == "device_ops":
                return None
            return {"op": "error", "error": f"mtia device: {msg}"}, []
        finally:
            spent = time.monotonic() - t0
            self.stats.serve_s += spent
            if self.call is not None:
                self.call.host_s += spent

    def _charge(self, kind: str, nbytes: int, seconds: float) -> None:
        if self.call is not None:
            self.call.transfers.append(Transfer(kind, nbytes, seconds))

    def _dram_s(self, nbytes: int) -> float:
        m = self.description
        return m.launch_overhead_ns * 1e-9 + nbytes / m.dram_bw

    def _upload_s(self, nbytes: int) -> float:
        m = self.description
        return m.host_link_latency_ns * 1e-9 + nbytes / m.host_link_bw

    def _device_ops(self, header: dict[str, Any], blobs: list[bytearray]) -> None:
        ops = header.get("ops")
        if not isinstance(ops, list):
            raise DeviceRequestError("device_ops must carry a list of operations")
        mem = self.memory
        for op in ops:
            if not isinstance(op, dict):
                raise DeviceRequestError("a device operation must be an object")
            kind = op.get("op")
            self.stats.device_ops += 1
            if kind == "alloc":
                mem.alloc(op.get("h"), op.get("nbytes"))
            elif kind == "free":
                mem.free(op.get("h"))
            elif kind == "fill":
                view = mem.view(op.get("dst"))
                mem.tensor(view).fill_(_fill_value(op.get("value")))
                self._charge("fill", view.nbytes, self._dram_s(view.nbytes))
            elif kind == "copy":
                dst, src = mem.view(op.get("dst")), mem.view(op.get("src"))
                if dst.shape != src.shape:
                    raise DeviceRequestError(f"device copy between shapes {src.shape} and {dst.shape}")
                mem.tensor(dst).copy_(mem.tensor(src).clone())
                self._charge("copy", dst.nbytes + src.nbytes, self._dram_s(dst.nbytes + src.nbytes))
            elif kind == "upload":
                self._upload(op, blobs)
            else:
                raise DeviceRequestError(f"unknown device operation {kind!r}")

    def _upload(self, op: dict[str, Any], blobs: list[bytearray]) -> None:
        import torch

        view = self.memory.view(op.get("dst"))
        index = op.get("blob")
        if not isinstance(index, int) or not 0 <= index < len(blobs):
            raise DeviceRequestError("an upload names a missing blob")
        blob = blobs[index]
        if len(blob) != view.nbytes:
            raise DeviceRequestError(f"an upload of {len(blob)} bytes into a view of {view.nbytes}")
        if view.nbytes:
            src = torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(view.dtype).reshape(view.shape)
            self.memory.tensor(view).copy_(src)
        self.stats.bytes_in += view.nbytes
        self._charge("upload", view.nbytes, self._upload_s(view.nbytes))

    def _launch(self, header: dict[str, Any], blobs: list[bytearray]) -> tuple[dict[str, Any], list[Any]]:
        if header.get("op") != "launch":
            raise DeviceRequestError(f"unknown device request {header.get('op')!r}")
        name = header.get("name")
        if not isinstance(name, str) or not blobs:
            raise DeviceRequestError("a launch needs the kernel's name and its ELF image")
        grid = tuple(_int_list(header.get("grid"), 3, "grid"))
        if any(g < 1 for g in grid) or math.prod(grid) > MAX_PROGRAMS:
            raise DeviceRequestError(f"grid {grid} is empty or larger than {MAX_PROGRAMS} programs")
        arg_types = header.get("arg_types")
        if not isinstance(arg_types, list) or not all(isinstance(t, str) for t in arg_types):
            raise DeviceRequestError("arg_types must be a list of strings")
        raw = header.get("slots")
        if not isinstance(raw, list) or len(raw) != len(arg_types):
            raise DeviceRequestError("one slot per argument type is needed")
        slots, data, owners = self._resolve(raw, blobs[1:])
        self.stats.launches += 1
        g3 = (grid[0], grid[1], grid[2])
        result, post = self._execute(
            bytes(blobs[0]),
            name,
            g3,
            slots,
            data,
            arg_types,
            owners,
            dual_core=bool(header.get("dual_core")),
            blocked=bool(header.get("blocked")),
            sram_mode=str(header.get("sram_mode", "cache")),
        )
        self._write_back(owners, data, post)
        from lowering.backend.launch import LaunchRecord

        record = LaunchRecord(kernel=name, grid=g3, result=result, tags=_source_tags(header.get("tags")))
        if self.call is not None:
            self.call.launches.append(record)
        else:
            self.outside_calls += 1
        return {"op": "launched", "cycles": float(result.cycles), "seconds": float(result.seconds)}, []

    def _execute(
        self,
        elf: bytes,
        name: str,
        grid: tuple[int, int, int],
        slots: list[tuple[Any, ...]],
        data: list[Any],
        arg_types: list[str],
        owners: list[int | None],
        **options: Any,
    ) -> tuple[Any, list[Any]]:
        """Run one resolved launch: (LaunchResult, every storage's bytes afterwards)."""
        return self.session.run(elf, name, grid, slots, data, arg_types, **options)

    def _resolve(
        self, raw: list[Any], host_blobs: list[bytearray]
    ) -> tuple[list[tuple[Any, ...]], list[Any], list[int | None]]:
        """The launch's slots over a list of storages (device storages by handle, host tensors as
        temporary uploads charged to the call); `owners[i]` is storage i's handle (None: upload)."""
        from lowering.backend.launch import as_u8

        slots: list[tuple[Any, ...]] = []
        data: list[Any] = []
        owners: list[int | None] = []
        index: dict[tuple[str, int], int] = {}
        for s in raw:
            if not isinstance(s, list) or not s:
                raise DeviceRequestError("a slot must be a non-empty list")
            if s[0] in ("dptr", "host") and len(s) == 3:
                key, off = _int_list(s[1:], 2, "a pointer slot")
                if (s[0], key) not in index:
                    if s[0] == "dptr":
                        buf = self.memory.storage(key)
                        owners.append(key)
                    else:
                        if not 0 <= key < len(host_blobs):
                            raise DeviceRequestError("a host pointer names a missing blob")
                        buf = as_u8(host_blobs[key])
                        owners.append(None)
                        self.stats.bytes_in += buf.size
                        self._charge("upload", buf.size, self._upload_s(buf.size))
                    index[(s[0], key)] = len(data)
                    data.append(buf)
                i = index[(s[0], key)]
                if off < 0 or off > data[i].size:
                    raise DeviceRequestError(f"a pointer argument's offset {off} is outside its storage")
                slots.append(("ptr", i, off))
            elif s[0] == "null":
                slots.append(("null",))
            elif s[0] == "scalar" and len(s) == 2:
                slots.append(("scalar", _int_list(s[1:], 1, "a scalar slot")[0]))
            else:
                raise DeviceRequestError(f"unknown slot {s[:1]}")
        return slots, data, owners

    def _write_back(self, owners: list[int | None], before: list[Any], after: list[Any]) -> None:
        """Keep what the launch left in each device storage; refuse writes into host uploads."""
        from lowering.backend.launch import same_bytes

        for handle, b, a in zip(owners, before, after, strict=True):
            if a is None or not a.size or a.ctypes.data == b.ctypes.data:
                continue
            if handle is not None:
                self.memory.set_storage(handle, a)
            elif not same_bytes(a, b):
                raise DeviceRequestError(
                    "a kernel wrote into a host tensor (uploaded for the launch, never copied back): "
                    "allocate outputs in forward with torch.empty / torch.empty_like (device memory)"
                )


def _source_tags(raw: Any, limit: int = 1 << 16) -> tuple[str, ...]:
    """The candidate's command tags (labels for the profile's source lines only: never trusted for
    timing or correctness), bounded in number and length."""
    if not isinstance(raw, list):
        return ()
    return tuple(t[:400] for t in raw[:limit] if isinstance(t, str))
