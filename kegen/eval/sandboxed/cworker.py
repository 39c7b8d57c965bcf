"""The candidate worker W: the only process where candidate code runs (inside the sandbox).

It serves the evaluator over one inherited socket (`kegen.eval.wire` framing):

    E -> W  {"op": "init", candidate, target, seed, allow_ops, check_cheats} + init inputs
    W -> E  {"op": "ready"} | {"op": "failed", ...}
    E -> W  {"op": "call", "inputs": ...} + input bytes; mtia: device tensor descriptions, no bytes
    (W -> E {"op": "device_ops", ...})                                mtia: alloc/free/fill/copy/upload
    (W -> E {"op": "launch", ...} / E -> W {"op": "launched", ...})   mtia: the device is E's
    W -> E  {"op": "result", "outputs": ..., "diag": ...} + output bytes (mtia: descriptions only)
            | {"op": "failed", ...}
    E -> W  {"op": "gpu_time", "inputs": [...]}  (GPU targets: CUDA-event times measured here)
    E -> W  {"op": "gpu_profile", "inputs": ...}  W -> E {"op": "gpu_kernels", ...}  (GPU: kernel table)

The evaluator trusts nothing it receives: outputs are bytes it checks itself, and W's own
diagnostics (op guard, threads, input mutation) can only fail the candidate, never pass it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kegen.targets import GPU_TARGETS
from lowering.backend.device_wire import recv_frame, send_frame


def _failed(exc: BaseException) -> dict[str, Any]:
    from kegen.eval.errors import CandidateError

    if isinstance(exc, CandidateError):
        return {"op": "failed", "status": exc.status, "message": exc.message, "source_line": exc.source_line}
    return {
        "op": "failed",
        "status": "runtime_error",
        "message": f"evaluation worker failed: {type(exc).__name__}: {exc}",
        "details": traceback.format_exc()[-2000:],
    }


class CandidateServer:
    """W's state: the candidate's model and its guards."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.model: Any = None
        self.guards: Any = None
        self.gpu = False
        self.device = "cpu"
        self.check = True
        self.cache_dir: str | None = None
        self.mtia = False
        self.last_outputs: Any = None
        self.remote: Any = None  # mtia: the device connection, held here (candidates cannot swap it)

    def init(self, job: dict[str, Any], blobs: list[bytearray]) -> dict[str, Any]:
        import torch

        from kegen.eval.loader import check_constructor, load_candidate
        from kegen.eval.sandboxed.runner import Guards, build_model, classify
        from kegen.eval.wire import decode_values

        self.gpu = job.get("target") in GPU_TARGETS
        if job.get("target") == "mtia" and isinstance(job.get("machine"), str) and job["machine"]:
            from lowering.backend.options import use_machine

            use_machine(job["machine"])  # every compile of this worker targets the evaluator's machine
        self.device = "cuda" if self.gpu else "cpu"
        self.check = bool(job.get("check_cheats", True))
        path = Path(str(job["candidate"]))
        self.cache_dir = _private_cache(job.get("cache_seed"))
        init = decode_values(job.get("init_inputs") or [], blobs, self.device)
        self.guards = Guards(path, tuple(job.get("allow_ops") or ()), self.check, self.gpu)
        cls = load_candidate(path)
        check_constructor(cls, init)
        try:
            self.model = build_model(cls, init, int(job.get("seed", 0)), self.device)
        except Exception as exc:
            raise classify(exc, path, "ModelNew(*get_init_inputs()) failed") from exc
        self.mtia = job.get("target") == "mtia"
        if self.mtia:  # the model's tensors move to the device; the worker keeps descriptions only
            from kegen.eval.sandboxed.device_model import model_to_device

            model_to_device(self.model, self.remote)
            self.remote.flush()
        send_frame(self.sock, {"op": "ready"})
        del torch
        return {}

    def call(self, job: dict[str, Any], blobs: list[bytearray]) -> None:
        from kegen.eval.inputs import clone_all
        from kegen.eval.sandboxed import guards as cheats
        from kegen.eval.wire import decode_values, encode_values

        if self.mtia:
            self._call_device(job)
            return
        inputs = decode_values(job.get("inputs") or [], blobs, self.device)
        pristine = clone_all(inputs) if self.check else None
        t0 = time.perf_counter()
        outs = self.guards.call(self.model, inputs, "candidate forward")
        elapsed = time.perf_counter() - t0
        diag = None
        if pristine is not None and not _bitwise_unchanged(pristine, inputs):
            diag = cheats.check_mutation(pristine, inputs, set())
        metas, out_blobs = encode_values(list(outs))
        send_frame(self.sock, {"op": "result", "outputs": metas, "diag": diag, "host_s": elapsed}, out_blobs)

    def _call_device(self, job: dict[str, Any]) -> None:
        """mtia: inputs are device tensors the evaluator placed; outputs go back as descriptions."""
        from kegen.eval.sandboxed.device_model import device_inputs, device_outputs, on_device

        device = self.remote
        self.last_outputs = None
        inputs = device_inputs(job.get("inputs") or [], device)
        t0 = time.perf_counter()
        with on_device(device):
            outs = self.guards.call(self.model, inputs, "candidate forward")
        elapsed = time.perf_counter() - t0
        metas = device_outputs(outs, self.guards.path)
        self.last_outputs = outs  # alive until the evaluator has read them (freed with the next call)
        del inputs, outs
        device.flush()
        send_frame(self.sock, {"op": "result", "outputs": metas, "diag": None, "host_s": elapsed})

    def gpu_time(self, job: dict[str, Any], blobs: list[bytearray]) -> None:
        """Time one call per input set with CUDA events (GPU targets: trusted-on-GPU, see THREAT_MODEL)."""
        from kegen.eval.timing_gpu import time_calls
        from kegen.eval.wire import decode_values, encode_values

        sets = [decode_values(m, blobs, self.device) for m in job.get("sets") or []]
        samples, all_outs = time_calls(
            lambda fwd, inputs: self.guards.call(fwd, inputs, "candidate forward (timing)", watch_ops=False),
            self.model,
            sets,
        )
        metas: list[Any] = []
        out_blobs: list[bytes] = []
        for outs in all_outs:
            m, b = encode_values(list(outs))
            for item in m:
                if "blob" in item:
                    item["blob"] += len(out_blobs)
            metas.append(m)
            out_blobs.extend(b)
        send_frame(self.sock, {"op": "timed", "samples": samples, "outputs": metas}, out_blobs)

    def gpu_profile(self, job: dict[str, Any], blobs: list[bytearray]) -> None:
        """The torch profiler's kernel table of one forward (GPU targets; a profile, never a verdict)."""
        from kegen.eval.sandboxed.gpu_kernels import worker_kernel_table
        from kegen.eval.wire import decode_values

        inputs = decode_values(job.get("inputs") or [], blobs, self.device)
        send_frame(self.sock, worker_kernel_table(self.model, inputs))

    def cache_dump(self) -> None:
        """Send this job's Triton cache files (relative path + bytes; the evaluator checks them)."""
        names: list[str] = []
        blobs: list[bytes] = []
        total = 0
        root = self.cache_dir
        for dirpath, _, files in os.walk(root) if root else ():
            for name in files:
                full = os.path.join(dirpath, name)
                data = Path(full).read_bytes()
                total += len(data)
                if total > 64 * 1024 * 1024 or len(names) >= 512:
                    names, blobs = [], []
                    break
                names.append(os.path.relpath(full, root))
                blobs.append(data)
        send_frame(self.sock, {"op": "cache", "files": names}, blobs)

    def serve(self) -> None:
        while True:
            try:
                job, blobs = recv_frame(self.sock)
            except Exception:
                return  # the evaluator went away
            op = job.get("op")
            if op == "bye":
                return
            try:
                if op == "init":
                    self.init(job, blobs)
                elif op == "call":
                    self.call(job, blobs)
                elif op == "gpu_time":
                    self.gpu_time(job, blobs)
                elif op == "gpu_profile":
                    self.gpu_profile(job, blobs)
                elif op == "cache_dump":
                    self.cache_dump()
                else:
                    send_frame(
                        self.sock, {"op": "failed", "status": "runtime_error", "message": f"bad op {op}"}
                    )
            except BaseException as exc:  # noqa: BLE001 - every failure is reported to E
                try:
                    send_frame(self.sock, _failed(exc))
                except OSError:
                    return


def _bitwise_unchanged(pristine: list[Any], after: list[Any]) -> bool:
    """Every input tensor holds exactly its bytes from before the call (the common case, checked
    without the temporaries of `cheats.check_mutation`, which decides otherwise)."""
    import torch

    for p, a in zip(pristine, after, strict=True):
        if not isinstance(p, torch.Tensor):
            continue
        if (
            not isinstance(a, torch.Tensor)
            or p.shape != a.shape
            or p.dtype != a.dtype
            or a.device != p.device
        ):
            return False
        if p.numel() and not torch.equal(
            p.detach().reshape(-1).view(torch.uint8), a.detach().contiguous().reshape(-1).view(torch.uint8)
        ):
            return False
    return True


def _private_cache(seed: Any) -> str:
    """A fresh Triton cache directory for this job (seeded from the evaluator's copy for this source)."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="triton-cache-")
    if isinstance(seed, str) and os.path.isdir(seed):
        shutil.copytree(seed, path, dirs_exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = path
    return path


def main(fd: int) -> None:
    """Serve the evaluator on socket `fd`, then exit without waiting on the candidate's threads."""
    sock = socket.socket(fileno=fd)
    from kegen.eval.sandboxed.worker import block_network

    block_network()
    server = CandidateServer(sock)
    if os.environ.get("KEGEN_TARGET") == "mtia":
        from lowering.backend import device_client

        server.remote = device_client.attach(sock)
    try:
        server.serve()
    finally:
        if server.cache_dir:
            import shutil

            shutil.rmtree(server.cache_dir, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]))
