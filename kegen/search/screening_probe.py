"""The screening probe: compile a candidate in the evaluator's sandbox and record its launches
without simulating them.

It runs in the trusted evaluator's process (the executor's task), never in the candidate's: the
candidate is loaded and called in the same bubblewrap worker `kegen.eval` uses (`WorkerSession`),
whose Triton driver sends every launch to this side. Instead of the simulated chip, a
`RecordingDevice` answers: it keeps a digest of what the launch asked for (ELF image, kernel,
grid, launch options, argument slots, the bytes of every storage before the launch) and hands
back deterministic pseudo-random storage contents, so the call finishes at once. The digest of
all launches plus the outputs the candidate returned is the candidate's *artifact key*: two
candidates with the same key asked the chip for exactly the same work and post-processed its
result the same way (any nondeterminism only makes keys differ: a missed duplicate, never a
false one). The worker's Triton cache is kept by source as in an evaluation, so the evaluation
that follows a probe does not compile again.

The probe also measures what a static lower bound needs: the problem's roofline (FLOPs and
minimum bytes of the reference, `kegen.eval.roofline`) and, per launch, programs and SRAM mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PROBE_SEED = 20261203  # inputs of the probe call (not secret: the probe judges nothing)
MAX_FILL_BYTES = 1 << 30


@dataclass(frozen=True)
class LaunchSummary:
    """One launch as the probe saw it (what the static bound reads)."""

    kernel: str
    grid: tuple[int, int, int]
    sram_mode: str
    dual_core: bool
    elf_sha256: str

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass
class ProbeResult:
    """What the probe found: a key (ok), the compiler's message (compile_error), or why it could not
    tell (failed: the candidate is then simply evaluated)."""

    status: str  # "ok" | "compile_error" | "failed"
    message: str = ""
    key: str | None = None
    launches: list[LaunchSummary] = field(default_factory=list)
    roofline: dict[str, float] = field(default_factory=dict)
    duration_s: float = 0.0
    source_line: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["launches"] = [dict(asdict(x), programs=x.programs) for x in self.launches]
        return data


class RecordingDevice:
    """Stands in for `kegen.eval.device.MtiaDevice` during a probe: validates and records each
    launch request and answers with pseudo-random storage contents; simulates nothing."""

    def __init__(self, salt: bytes | None = None) -> None:
        self.salt = salt if salt is not None else secrets.token_bytes(16)
        self.records: list[dict[str, Any]] = []
        self.launches: list[LaunchSummary] = []
        self.errors: list[str] = []

    def begin_call(self) -> None:
        return None

    def end_call(self) -> None:
        return None

    def handle(self, header: dict[str, Any], blobs: list[bytearray]) -> tuple[dict[str, Any], list[bytes]]:
        try:
            return self._record(header, blobs)
        except Exception as exc:  # a malformed request: the probe cannot tell, the evaluation will
            msg = f"{type(exc).__name__}: {str(exc)[:500]}"
            self.errors.append(msg)
            return {"op": "error", "error": f"mtia device (screening probe): {msg}"}, []

    def _record(self, header: dict[str, Any], blobs: list[bytearray]) -> tuple[dict[str, Any], list[bytes]]:
        from kegen.eval.device import MAX_PROGRAMS, DeviceRequestError, parse_slots

        name, grid, keys = header.get("name"), header.get("grid"), header.get("keys")
        if not isinstance(name, str) or not blobs:
            raise DeviceRequestError("a launch needs the kernel's name and its ELF image")
        if not (isinstance(grid, list) and len(grid) == 3 and all(type(g) is int and g >= 1 for g in grid)):
            raise DeviceRequestError(f"grid {grid!r} must be three positive integers")
        if grid[0] * grid[1] * grid[2] > MAX_PROGRAMS:
            raise DeviceRequestError(f"grid {grid} is larger than {MAX_PROGRAMS} programs")
        if not isinstance(keys, list) or len(keys) != len(blobs) - 1:
            raise DeviceRequestError("one key per storage is needed")
        arg_types = header.get("arg_types")
        if not isinstance(arg_types, list) or not all(isinstance(t, str) for t in arg_types):
            raise DeviceRequestError("arg_types must be a list of strings")
        slots = parse_slots(header.get("slots"), len(keys))
        pre = blobs[1:]
        if sum(len(p) for p in pre) > MAX_FILL_BYTES:
            raise DeviceRequestError("the launch's storages exceed the probe's size limit")
        elf_sha = hashlib.sha256(bytes(blobs[0])).hexdigest()
        sram_mode, dual = str(header.get("sram_mode", "cache")), bool(header.get("dual_core"))
        record = {
            "kernel": name,
            "grid": grid,
            "arg_types": arg_types,
            "slots": [list(s) for s in slots],
            "sram_mode": sram_mode,
            "dual_core": dual,
            "blocked": bool(header.get("blocked")),
            "elf": elf_sha,
            "pre": [hashlib.sha256(p).hexdigest() for p in pre],
        }
        self.records.append(record)
        self.launches.append(LaunchSummary(name, (grid[0], grid[1], grid[2]), sram_mode, dual, elf_sha))
        post = [self._fill(len(self.records), i, len(p)) for i, p in enumerate(pre)]
        reply = {"op": "launched", "changed": [True] * len(post), "cycles": 0.0, "seconds": 0.0}
        return reply, post

    def _fill(self, launch: int, storage: int, n: int) -> bytes:
        import numpy as np

        digest = hashlib.sha256(self.salt + f"{launch}:{storage}".encode()).digest()
        seed = int.from_bytes(digest[:8], "little")
        return np.random.default_rng(seed).bytes(n) if n else b""


def artifact_key(records: list[dict[str, Any]], outputs: list[Any], metas: list[Any], machine: str) -> str:
    """Digest of every launch request and of the outputs the candidate returned."""
    import torch

    h = hashlib.sha256(f"mtia\0{machine}\0".encode())
    h.update(json.dumps(records, sort_keys=True, default=str).encode())
    for meta in metas:
        h.update(json.dumps({k: v for k, v in meta.items() if k != "blob"}, sort_keys=True).encode())
    for out in outputs:
        if isinstance(out, torch.Tensor):
            c = out.detach().contiguous().cpu()
            h.update(str((c.dtype, tuple(c.shape))).encode())
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b"")
    return h.hexdigest()[:32]


def probe(
    problem: Path, code: str, machine: str, timeout_s: float = 120.0, salt: bytes | None = None
) -> ProbeResult:
    """Compile and call `code` once in a sandboxed worker with a `RecordingDevice` (`salt`: the
    search's secret for the storage contents; keys compare only under the same salt); never raises."""
    t0 = time.monotonic()
    try:
        res = _probe(problem, code, machine, timeout_s, salt)
    except Exception as exc:  # the probe is an optimisation: the candidate is then just evaluated
        res = ProbeResult("failed", f"screening probe failed: {type(exc).__name__}: {str(exc)[:300]}")
    res.duration_s = time.monotonic() - t0
    return res


def _probe(problem_path: Path, code: str, machine: str, timeout_s: float, salt: bytes | None) -> ProbeResult:
    from kegen.eval import roofline, sandbox
    from kegen.eval.errors import CandidateError, ProblemError
    from kegen.eval.evaluator import private_problem_copy
    from kegen.eval.inputs import InputFactory, clone_all
    from kegen.eval.loader import load_problem
    from kegen.eval.runner import build_model, call_reference
    from kegen.eval.session import WorkerSession

    with tempfile.TemporaryDirectory(prefix="kegen-probe-") as private:
        os.chmod(private, 0o700)
        copy, _ = private_problem_copy(problem_path, Path(private))
        try:
            problem = load_problem(copy)
            factory = InputFactory(problem, "cpu")
            import torch

            torch.manual_seed(PROBE_SEED)
            init = factory.init_inputs()
            model = build_model(problem.model_cls, clone_all(init), PROBE_SEED, "cpu")
            inputs = factory.make(PROBE_SEED)
            ref_out = call_reference(model, clone_all(inputs), False)
            rf = roofline.problem_roofline(model, clone_all(inputs), ref_out, roofline.mtia_peak(machine))
        except (ProblemError, Exception) as exc:  # the evaluation reports a broken problem itself
            return ProbeResult("failed", f"the problem could not be prepared: {type(exc).__name__}: {exc}")
        cand = Path(private) / "candidate.py"
        cand.write_text(code)
        env = sandbox.worker_env("mtia", machine)
        device = RecordingDevice(salt)
        zygote = sandbox.acquire(env)
        try:
            session = WorkerSession(
                zygote,
                cand,
                env=env,
                device=device,  # type: ignore[arg-type]  # duck-typed: handle/begin_call/end_call
                deadline=time.monotonic() + timeout_s,
                timeout_s=timeout_s,
                memory_limit_mb=8192,
                out_device="cpu",
            )
        except Exception:
            zygote.lock.release()
            raise
        try:
            session.init(init, PROBE_SEED, {"target": "mtia", "allow_ops": [], "check_cheats": False})
            res = session.call(inputs)
        except CandidateError as exc:
            if exc.status == "compile_error":
                return ProbeResult("compile_error", exc.message, source_line=exc.source_line)
            return ProbeResult("failed", f"{exc.status}: {exc.message[:300]}")
        finally:
            session.close()
    if device.errors or not device.records:
        why = device.errors[0] if device.errors else "no kernel launch reached the device"
        return ProbeResult("failed", why)
    key = artifact_key(device.records, res.outputs, res.metas, machine)
    figures = {
        "flops": float(rf.flops),
        "bytes": float(rf.bytes),
        "compute_time_s": rf.compute_time_s,
        "memory_time_s": rf.memory_time_s,
    }
    return ProbeResult("ok", key=key, launches=device.launches, roofline=figures)
