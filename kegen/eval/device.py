"""The simulated MTIA chip as a device outside the candidate's process (owned by the evaluator).

The candidate's Triton driver (`lowering.backend.device_client`) sends each launch as plain data:
ELF image, grid, scalar slots and the bytes of every storage a pointer argument points into. This
device runs it on its own simulator — built from the evaluator's machine description, never the
candidate's — and answers with the storages' bytes afterwards. It keeps, per call window, what
every launch received and returned, so the evaluator can tell:

- the simulated time and counters of the call (the sum over the launches it ran itself);
- which output bytes were written by a kernel during the call (`kegen.eval.provenance`);
- which data the host produced during the call and fed to kernels.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the simulator (kegen[mtia]) is imported only when a device is made
    import numpy as np

    from lowering.backend.launch import LaunchRecord

MAX_PROGRAMS = 1 << 22  # grid points per launch
ELEMENT_DTYPES = {
    "fp32": "float32",
    "f32": "float32",
    "fp16": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "f64": "float64",
    "i8": "int8",
    "u8": "uint8",
    "i1": "uint8",
    "i16": "int16",
    "i32": "int32",
    "u32": "int32",
    "i64": "int64",
    "u64": "int64",
}


@dataclass
class LaunchLog:
    """Everything one launch received and returned (kept for the call window)."""

    record: LaunchRecord
    elf: bytes
    slots: list[tuple[Any, ...]]
    arg_types: list[str]
    dual_core: bool
    blocked: bool
    sram_mode: str
    keys: list[int]
    pre: list[np.ndarray]  # uint8, the evaluator's own copies (never written after the launch)
    post: list[np.ndarray]
    dtypes: list[str | None]  # element dtype of each storage (from the pointer argument's type)


@dataclass
class CallRecord:
    """The launches of one call of the candidate's forward, as the device saw them."""

    logs: list[LaunchLog] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    host_s: float = 0.0  # evaluator wall time spent simulating

    @property
    def launches(self) -> list[LaunchRecord]:
        return [log.record for log in self.logs]

    @property
    def seconds(self) -> float:
        return sum(float(log.record.result.seconds) for log in self.logs)

    def drop_bytes(self) -> None:
        """Forget the storages' bytes (after the call's checks): keeps launches, time and errors."""
        for log in self.logs:
            log.pre, log.post = [], []


@dataclass
class DeviceStats:
    """What the device did for the evaluator (cumulative; `delta` gives one evaluation's share)."""

    launches: int = 0  # launch requests served
    replays: int = 0  # provenance replays (a recorded launch run again with poisoned bytes)
    bytes_in: int = 0  # storage bytes received with launch requests
    bytes_out: int = 0  # storage bytes sent back (changed storages only)
    serve_s: float = 0.0  # wall seconds serving launch requests (copies, simulation, compares)
    replay_s: float = 0.0  # wall seconds of provenance replays

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


class DeviceRequestError(ValueError):
    """A launch request that is malformed (the candidate's process sent garbage)."""


def _int_list(value: Any, n: int | None, what: str) -> list[int]:
    if not isinstance(value, list) or (n is not None and len(value) != n):
        raise DeviceRequestError(f"{what} must be a list of {n or 'some'} integers")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise DeviceRequestError(f"{what} must hold integers")
    return value


def parse_slots(raw: Any, n_storages: int) -> list[tuple[Any, ...]]:
    if not isinstance(raw, list):
        raise DeviceRequestError("slots must be a list")
    slots: list[tuple[Any, ...]] = []
    for s in raw:
        if not isinstance(s, list) or not s:
            raise DeviceRequestError("a slot must be a non-empty list")
        if s[0] == "ptr" and len(s) == 3:
            idx, off = _int_list(s[1:], 2, "a pointer slot")
            if not 0 <= idx < n_storages or off < 0:
                raise DeviceRequestError("a pointer slot names a missing storage")
            slots.append(("ptr", idx, off))
        elif s[0] == "null":
            slots.append(("null",))
        elif s[0] == "scalar" and len(s) == 2:
            slots.append(("scalar", _int_list(s[1:], 1, "a scalar slot")[0]))
        else:
            raise DeviceRequestError(f"unknown slot {s[:1]}")
    return slots


def storage_dtypes(slots: list[tuple[Any, ...]], arg_types: list[str], n: int) -> list[str | None]:
    found: list[str | None] = [None] * n
    for slot, ty in zip(slots, arg_types, strict=True):
        if slot[0] == "ptr" and found[slot[1]] is None:
            found[slot[1]] = ELEMENT_DTYPES.get(ty.lstrip("*"))
    return found


class MtiaDevice:
    """One simulated chip of the evaluator; serves the candidate's launch requests."""

    def __init__(self, machine: str) -> None:
        from lowering.backend.launch import SimulatorSession

        self.machine = machine
        self.session = SimulatorSession(machine)
        self.call: CallRecord | None = None
        self.outside_calls = 0  # launches requested while no call was in progress (init, warm-up)
        self.stats = DeviceStats()

    def snapshot(self) -> dict[str, Any]:
        """The device's and its simulator's counters now (subtract two snapshots for a span)."""
        return {**self.stats.to_dict(), "simulator": self.session.stats.to_dict()}

    def begin_call(self) -> None:
        self.call = CallRecord()

    def end_call(self) -> CallRecord:
        call, self.call = self.call or CallRecord(), None
        return call

    def handle(
        self, header: dict[str, Any], blobs: list[bytearray]
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Serve one `launch` request; errors become an `error` reply (and are recorded)."""
        t0 = time.monotonic()
        try:
            return self._launch(header, blobs)
        except Exception as exc:  # the candidate's kernel failed on the device, or the request is bad
            msg = f"{type(exc).__name__}: {str(exc)[:1500]}"
            if self.call is not None:
                self.call.errors.append(msg)
            return {"op": "error", "error": f"mtia device: {msg}"}, []
        finally:
            spent = time.monotonic() - t0
            self.stats.serve_s += spent
            if self.call is not None:
                self.call.host_s += spent

    def _launch(
        self, header: dict[str, Any], blobs: list[bytearray]
    ) -> tuple[dict[str, Any], list[np.ndarray]]:
        name = header.get("name")
        if not isinstance(name, str) or not blobs:
            raise DeviceRequestError("a launch needs the kernel's name and its ELF image")
        grid = tuple(_int_list(header.get("grid"), 3, "grid"))
        if any(g < 1 for g in grid) or grid[0] * grid[1] * grid[2] > MAX_PROGRAMS:
            raise DeviceRequestError(f"grid {grid} is empty or larger than {MAX_PROGRAMS} programs")
        arg_types = header.get("arg_types")
        if not isinstance(arg_types, list) or not all(isinstance(t, str) for t in arg_types):
            raise DeviceRequestError("arg_types must be a list of strings")
        keys = _int_list(header.get("keys"), len(blobs) - 1, "keys")
        slots = parse_slots(header.get("slots"), len(keys))
        if len(slots) != len(arg_types):
            raise DeviceRequestError("one slot per argument type is needed")
        from lowering.backend.launch import as_u8, same_bytes

        elf, pre = bytes(blobs[0]), [as_u8(b) for b in blobs[1:]]  # received buffers: ours alone
        self.stats.launches += 1
        self.stats.bytes_in += sum(p.size for p in pre)
        dual, blocked = bool(header.get("dual_core")), bool(header.get("blocked"))
        sram_mode = str(header.get("sram_mode", "cache"))
        g3 = (grid[0], grid[1], grid[2])
        result, post = self.session.run(
            elf, name, g3, slots, pre, arg_types, dual_core=dual, blocked=blocked, sram_mode=sram_mode
        )
        from lowering.backend.launch import LaunchRecord

        log = LaunchLog(
            LaunchRecord(kernel=name, grid=g3, result=result, tags=_source_tags(header.get("tags"))),
            elf,
            slots,
            list(arg_types),
            dual,
            blocked,
            sram_mode,
            keys,
            pre,
            post,
            storage_dtypes(slots, arg_types, len(keys)),
        )
        if self.call is not None:
            self.call.logs.append(log)
        else:
            self.outside_calls += 1
        changed = [not same_bytes(a, b) for a, b in zip(pre, post, strict=True)]
        self.stats.bytes_out += sum(p.size for p, c in zip(post, changed, strict=True) if c)
        reply = {
            "op": "launched",
            "changed": changed,
            "cycles": float(result.cycles),
            "seconds": float(result.seconds),
        }
        return reply, [p for p, c in zip(post, changed, strict=True) if c]

    def replay(self, log: LaunchLog, pre: list[np.ndarray], only: int | None = None) -> list[Any]:
        """Run a recorded launch again on other storage contents; return the contents afterwards
        (with `only`, just that storage's: the others are None)."""
        t0 = time.monotonic()
        self.stats.replays += 1
        try:
            return self._replay(log, pre, only)
        finally:
            self.stats.replay_s += time.monotonic() - t0

    def replay_poisoned(
        self, log: LaunchLog, j: int, positions: np.ndarray, poison: np.ndarray
    ) -> np.ndarray:
        """Run a recorded launch again with the elements at `positions` of storage `j` (elements of
        `poison`'s dtype) set to `poison`; return those elements afterwards. Poisons and reads the
        device's own copy in place: no copy of the storages."""
        itemsize = poison.dtype.itemsize
        got: list[np.ndarray] = []

        def elements(views: list[np.ndarray]) -> np.ndarray:
            view = views[j]
            return view[: view.size // itemsize * itemsize].view(poison.dtype)

        def edit(views: list[np.ndarray]) -> None:
            elements(views)[positions] = poison

        def peek(views: list[np.ndarray]) -> None:
            got.append(elements(views)[positions].copy())

        t0 = time.monotonic()
        self.stats.replays += 1
        try:
            self.session.run(
                log.elf,
                log.record.kernel,
                log.record.grid,
                log.slots,
                list(log.pre),
                log.arg_types,
                dual_core=log.dual_core,
                blocked=log.blocked,
                sram_mode=log.sram_mode,
                read_back=(),
                edit=edit,
                peek=peek,
            )
        finally:
            self.stats.replay_s += time.monotonic() - t0
        return got[0]

    def _replay(self, log: LaunchLog, pre: list[np.ndarray], only: int | None) -> list[Any]:
        _, post = self.session.run(
            log.elf,
            log.record.kernel,
            log.record.grid,
            log.slots,
            list(pre),
            log.arg_types,
            dual_core=log.dual_core,
            blocked=log.blocked,
            sram_mode=log.sram_mode,
            read_back=None if only is None else (only,),
        )
        return post


def _source_tags(raw: Any, limit: int = 1 << 16) -> tuple[str, ...]:
    """The candidate's command tags (labels for the profile's source lines only: never trusted for
    timing or correctness), bounded in number and length."""
    if not isinstance(raw, list):
        return ()
    return tuple(t[:400] for t in raw[:limit] if isinstance(t, str))
