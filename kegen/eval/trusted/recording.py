"""Record what a candidate asks of the mtia device without simulating it (the search's screening).

Public API: `record_candidate(problem, code, machine, timeout_s)` loads the candidate in the same
sandboxed worker an evaluation uses (`WorkerSession`), calls it once on fixed inputs and answers
every launch with a `RecordingDevice`: the device's memory model and request checks, but instead of
the simulated chip a digest of what the launch asked for (ELF image, kernel, grid, launch options,
argument slots, the bytes of every storage before the launch) and deterministic pseudo-random
contents afterwards, so the call finishes at once. The digest of all launches plus the outputs is
the candidate's *artifact key*: two candidates with the same key asked the chip for exactly the
same work and returned the same views of its results (nondeterminism only makes keys differ: a
missed duplicate, never a false one). It judges nothing: the inputs are not secret.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kegen.eval.trusted.device import MAX_PROGRAMS, MtiaDevice
from kegen.eval.trusted.device_memory import DeviceRequestError

PROBE_SEED = 20261203  # inputs of the recorded call (not secret: the recording judges nothing)
MAX_FILL_BYTES = 1 << 30


@dataclass
class Recording:
    """What `record_candidate` found: "ok" with a key and the launches, "compile_error" with the
    compiler's message, or "failed" with why it could not tell."""

    status: str
    message: str = ""
    key: str | None = None
    launches: list[dict[str, Any]] = field(default_factory=list)  # kernel, grid, sram_mode, dual_core, elf
    roofline: dict[str, float] = field(default_factory=dict)  # flops, bytes, compute/memory time
    source_line: str | None = None


class RecordingDevice(MtiaDevice):
    """An mtia device that records each launch and fills the storages with pseudo-random bytes."""

    def __init__(self, machine: str, salt: bytes | None = None) -> None:
        super().__init__(machine, simulate=False)
        self.salt = salt if salt is not None else secrets.token_bytes(16)
        self.records: list[dict[str, Any]] = []
        self.errors: list[str] = []

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
        if sum(d.size for d in data) > MAX_FILL_BYTES:
            raise DeviceRequestError("the launch's storages exceed the recording's size limit")
        self.records.append(
            {
                "kernel": name,
                "grid": list(grid),
                "arg_types": arg_types,
                "slots": [list(s) for s in slots],
                "sram_mode": str(options.get("sram_mode", "cache")),
                "dual_core": bool(options.get("dual_core")),
                "blocked": bool(options.get("blocked")),
                "elf": hashlib.sha256(elf).hexdigest(),
                "pre": [hashlib.sha256(d).hexdigest() for d in data],
            }
        )
        post = [
            self._fill(len(self.records), i, d.size) if owner is not None else None
            for i, (d, owner) in enumerate(zip(data, owners, strict=True))
        ]
        return SimpleNamespace(cycles=0.0, seconds=0.0, counters=None), post

    def handle(self, header: dict[str, Any], blobs: list[bytearray]) -> Any:
        if header.get("op") == "device_ops" and isinstance(header.get("ops"), list):
            moves = [  # data movement changes the work and its time: part of the key
                {**op, "blob": hashlib.sha256(blobs[op["blob"]]).hexdigest()}
                if op.get("op") == "upload"
                and isinstance(op.get("blob"), int)
                and 0 <= op["blob"] < len(blobs)
                else op
                for op in header["ops"]
                if isinstance(op, dict) and op.get("op") in ("fill", "copy", "upload")
            ]
            if moves:
                self.records.append({"device_ops": moves})
        served = super().handle(header, blobs)
        if served is not None and served[0].get("op") == "error":
            self.errors.append(str(served[0].get("error")))
        return served

    def _fill(self, launch: int, storage: int, n: int) -> Any:
        import numpy as np

        digest = hashlib.sha256(self.salt + f"{launch}:{storage}".encode()).digest()
        seed = int.from_bytes(digest[:8], "little")
        return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def artifact_key(records: list[dict[str, Any]], outputs: list[Any], machine: str) -> str:
    """Digest of every launch request and of the outputs the candidate returned."""
    import torch

    h = hashlib.sha256(f"mtia\0{machine}\0".encode())
    h.update(json.dumps(records, sort_keys=True, default=str).encode())
    for out in outputs:
        if isinstance(out, torch.Tensor):
            c = out.detach().contiguous().cpu()
            h.update(str((c.dtype, tuple(c.shape))).encode())
            h.update(c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b"")
    return h.hexdigest()[:32]


def record_candidate(
    problem_path: Path, code: str, machine: str, timeout_s: float = 120.0, salt: bytes | None = None
) -> Recording:
    """Compile and call the candidate once in the sandbox, recording its launches (see the module)."""
    from kegen.eval.errors import CandidateError, ProblemError
    from kegen.eval.inputs import InputFactory, clone_all
    from kegen.eval.loader import load_problem
    from kegen.eval.models import build_model, call_reference
    from kegen.eval.trusted import roofline, sandbox
    from kegen.eval.trusted.evaluator import private_problem_copy
    from kegen.eval.trusted.session import WorkerSession

    with tempfile.TemporaryDirectory(prefix="kegen-record-") as private:
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
            return Recording("failed", f"the problem could not be prepared: {type(exc).__name__}: {exc}")
        cand = Path(private) / "candidate.py"
        cand.write_text(code)
        env = sandbox.worker_env("mtia")
        device = RecordingDevice(machine, salt)
        zygote = sandbox.acquire(env)
        try:
            session = WorkerSession(
                zygote,
                cand,
                env=env,
                device=device,
                deadline=time.monotonic() + timeout_s,
                timeout_s=timeout_s,
                memory_limit_mb=8192,
                out_device="cpu",
                machine=machine,
            )
        except Exception:
            zygote.lock.release()
            raise
        try:
            session.init(
                init,
                PROBE_SEED,
                {"target": "mtia", "machine": machine, "allow_ops": [], "check_cheats": False},
            )
            res = session.call(inputs)
        except CandidateError as exc:
            if exc.status == "compile_error":
                return Recording("compile_error", exc.message, source_line=exc.source_line)
            return Recording("failed", f"{exc.status}: {exc.message[:300]}")
        finally:
            session.close()
    if device.errors or not any("kernel" in r for r in device.records):
        return Recording(
            "failed", device.errors[0] if device.errors else "no kernel launch reached the device"
        )
    launches = [
        {k: r[k] for k in ("kernel", "grid", "sram_mode", "dual_core", "elf")}
        for r in device.records
        if "kernel" in r
    ]
    figures = {
        "flops": float(rf.flops),
        "bytes": float(rf.bytes),
        "compute_time_s": rf.compute_time_s,
        "memory_time_s": rf.memory_time_s,
    }
    return Recording(
        "ok", key=artifact_key(device.records, res.outputs, machine), launches=launches, roofline=figures
    )


__all__ = ["MAX_PROGRAMS", "Recording", "RecordingDevice", "artifact_key", "record_candidate"]
