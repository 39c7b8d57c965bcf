"""The evaluator's end of one candidate worker: requests, the device it serves, limits and death.

`WorkerSession.call(inputs)` sends fresh inputs as plain data, serves the worker's launch requests
on the evaluator's own mtia device while the call runs, and returns the outputs as plain tensors
plus the device's record of the call. Every way the worker can fail (an error it reports, death,
hanging, memory or process count over the limit, garbage on the wire) becomes a CandidateError.
"""

from __future__ import annotations

import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kegen.eval.errors import CandidateError
from kegen.eval.trusted import compile_cache, sandbox
from kegen.eval.trusted.device import CallRecord, MtiaDevice
from kegen.eval.trusted.device_memory import DeviceRequestError, host_layout
from kegen.eval.wire import decode_values, encode_values
from lowering.backend.device_wire import WireError, recv_frame, send_frame

MAX_PROCESSES = 256
POLL_S = 0.1


@dataclass
class CallResult:
    """One call of the candidate as the evaluator saw it."""

    outputs: list[torch.Tensor]
    record: CallRecord | None  # mtia: the device's record of the call's launches and transfers
    wall_s: float  # evaluator wall clock of the whole call (request to reply)
    diag: str | None  # a cheat diagnostic (the worker's own, or the device's: can only fail the candidate)


class WorkerSession:
    """A live worker serving one model (the candidate, or a baseline)."""

    def __init__(
        self,
        zygote: Any,
        source: Path,
        *,
        env: dict[str, str],
        device: MtiaDevice | None,
        deadline: float,
        timeout_s: float,
        memory_limit_mb: int,
        out_device: str,
        machine: str = "",
    ) -> None:
        self.device, self.deadline, self.timeout_s = device, deadline, timeout_s
        self.memory_limit_mb, self.out_device = memory_limit_mb, out_device
        host_path, self.inside_path = sandbox.candidate_inbox_path(zygote, source)
        self.zygote = zygote
        self.source_name = source.name
        self.cache_key: str | None = None
        self.cache_seed: str | None = None
        self.calls_ok = 0
        if env.get("TRITON_INTERPRET") != "1":
            self.cache_key = compile_cache.cache_key(source, env.get("KEGEN_TARGET", ""), machine)
            if compile_cache.seed_job(self.cache_key, host_path.parent):
                self.cache_seed = str(Path(self.inside_path).parent / compile_cache.SEED_DIR)
        job = {"env": env, "cpu_limit_s": int(timeout_s) + 30, "fsize_mb": max(64, memory_limit_mb // 4)}
        if device is not None:
            device.open(memory_limit_mb * 1024 * 1024)  # a fresh, empty device memory per worker
        self.worker = zygote.start(job)
        self.max_bytes = memory_limit_mb * 1024 * 1024
        self._last_scan = 0.0

    # --- the protocol --------------------------------------------------------------------------
    def request(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytearray]]:
        """Send a request; serve launches until the worker's reply; raise CandidateError on failure."""
        try:
            send_frame(self.worker.sock, header, blobs)
        except OSError:
            raise self._death() from None
        while True:
            self._watch()
            ready, _, _ = select.select([self.worker.sock], [], [], POLL_S)
            if not ready:
                continue
            try:
                reply, rblobs = recv_frame(self.worker.sock, max_total=self.max_bytes)
            except WireError as exc:
                if "closed" in str(exc):
                    raise self._death() from None
                raise CandidateError(
                    "runtime_error", f"the candidate's worker broke the protocol: {exc}"
                ) from exc
            except OSError:
                raise self._death() from None
            op = reply.get("op")
            if op in ("launch", "device_ops"):
                served = (
                    self.device.handle(reply, rblobs)
                    if self.device is not None
                    else ({"op": "error", "error": "no mtia device on this target"}, [])
                )
                if served is None:  # memory operations: no reply
                    continue
                answer, ablobs = served
                try:
                    send_frame(self.worker.sock, answer, ablobs)
                except OSError:
                    raise self._death() from None
                continue
            if op == "failed":
                raise CandidateError(
                    str(reply.get("status") if reply.get("status") in _STATUSES else "runtime_error"),
                    str(reply.get("message") or "the candidate failed")[:4000],
                    reply.get("source_line") if isinstance(reply.get("source_line"), str) else None,
                )
            return reply, rblobs

    def _watch(self) -> None:
        self.worker.read_stderr()  # keep the pipe drained: a chatty worker must not block on it
        now = time.monotonic()
        if now > self.deadline:
            self.worker.kill()
            raise CandidateError(
                "timeout",
                f"candidate did not finish within {self.timeout_s:g} s (wall clock); the worker was killed",
            )
        if now - self._last_scan < POLL_S:  # the process table is scanned at most every POLL_S
            return
        self._last_scan = now
        rss_mb, nprocs = self.worker.usage()
        if rss_mb > self.memory_limit_mb:
            self.worker.kill()
            raise CandidateError(
                "runtime_error",
                f"candidate exceeded the memory limit of {self.memory_limit_mb} MB resident "
                f"({rss_mb:.0f} MB); the worker was killed",
            )
        if nprocs > MAX_PROCESSES:
            self.worker.kill()
            raise CandidateError(
                "runtime_error",
                f"candidate started more than {MAX_PROCESSES} processes; the worker was killed",
            )
        if self.worker.returncode() is not None:
            raise self._death()

    def _death(self) -> CandidateError:
        deadline = time.monotonic() + 3.0
        while self.worker.returncode() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        rc = self.worker.returncode()
        tail = self.worker.stderr_tail()
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            why = f"the worker was killed by {name}" + (" (CPU time limit)" if name == "SIGXCPU" else "")
        else:
            why = f"the worker exited with code {rc} before answering"
        if any(s in tail for s in ("MemoryError", "Cannot allocate memory", "std::bad_alloc")):
            why += " (out of memory: over the memory limit?)"
        if "File size limit" in tail or rc == -signal.SIGXFSZ:
            why += " (file size limit)"
        last = [ln for ln in tail.strip().splitlines() if ln.strip()][-1:]
        return CandidateError("runtime_error", why + (f"; last output: {last[0]}" if last else ""))

    # --- the operations --------------------------------------------------------------------------
    def init(self, init_inputs: list[Any], seed: int, config: dict[str, Any]) -> None:
        """Load the candidate and build its model (on mtia its tensors are then moved to the device)."""
        metas, blobs = encode_values(init_inputs)
        header = {
            "op": "init",
            "candidate": self.inside_path,
            "seed": seed,
            "init_inputs": metas,
            "cache_seed": self.cache_seed,
            **config,
        }
        if config.get("machine"):
            header["machine"] = self._machine_inside(str(config["machine"]))
        reply, _ = self.request(header, blobs)
        if reply.get("op") != "ready":
            raise CandidateError("runtime_error", f"unexpected reply to init: {reply.get('op')}")
        if self.device is not None and self.device.pending_error:
            error, self.device.pending_error = self.device.pending_error, None
            raise CandidateError("runtime_error", f"moving the model to the mtia device failed: {error}")

    def _machine_inside(self, machine: str) -> str:
        """A machine TOML file given by path travels with the candidate (the worker sees neither the
        caller's working directory nor its /tmp); a shipped machine's name is passed as it is."""
        from mtia_sim.machine import names_a_path

        path = Path(machine).expanduser()
        if not (names_a_path(machine) and path.is_file()):
            return machine
        return sandbox.candidate_inbox_path(self.zygote, path)[1]

    def call(self, inputs: list[Any]) -> CallResult:
        device = self.device
        placed: list[tuple[int, torch.Tensor]] = []
        if device is not None:  # mtia: the inputs go to the device; the worker gets descriptions
            metas: list[dict[str, Any]] = []
            blobs: list[Any] = []
            for v in inputs:
                if isinstance(v, torch.Tensor):
                    meta = device.memory.place(v)
                    placed.append((meta["dev"], v))
                    metas.append(meta)
                else:
                    metas.append(encode_values([v])[0][0])
            device.begin_call()
        else:
            metas, blobs = encode_values(inputs)
        t0 = time.perf_counter()
        try:
            reply, rblobs = self.request(
                {"op": "call", "inputs": metas}, blobs
            )  # no label: W cannot tell timed calls
        finally:
            record = device.end_call() if device is not None else None
        wall = time.perf_counter() - t0
        if reply.get("op") != "result":
            raise CandidateError("runtime_error", f"unexpected reply to a call: {reply.get('op')}")
        diag = reply.get("diag") if isinstance(reply.get("diag"), str) else None
        if device is not None:
            assert record is not None
            if record.errors:
                raise CandidateError(
                    "runtime_error", f"the mtia device refused a request: {record.errors[0]}"
                )
            outputs = self._read_outputs(reply.get("outputs"))
            diag = diag or _mutated_inputs(device, placed)
            for handle, _ in placed:
                device.memory.storages.pop(handle, None)
        else:
            outputs = self._decode(reply.get("outputs"), rblobs, self.out_device)
        if not all(isinstance(o, torch.Tensor) for o in outputs):
            raise CandidateError("runtime_error", "forward must return tensors")
        self.calls_ok += 1
        return CallResult(outputs, record, wall, diag)

    def _read_outputs(self, metas: Any) -> list[torch.Tensor]:
        """mtia: the outputs are device tensors; read their bytes from the device's own memory."""
        assert self.device is not None
        if not isinstance(metas, list):
            raise CandidateError("runtime_error", "the candidate's worker sent malformed outputs")
        outputs = []
        for i, meta in enumerate(metas):
            if not isinstance(meta, dict) or "dev" not in meta:
                raise CandidateError(
                    "runtime_error",
                    f"output {i} of forward is not an mtia device tensor: outputs must be written by kernels "
                    "into device memory (allocate them with torch.empty / torch.empty_like in forward)",
                )
            try:
                outputs.append(self.device.memory.read(meta))
            except DeviceRequestError as exc:
                raise CandidateError("runtime_error", f"output {i} of forward: {exc}") from exc
        return outputs

    def gpu_time(self, sets: list[list[Any]]) -> tuple[list[float], list[list[torch.Tensor]], float]:
        """GPU targets: one CUDA-event-timed call per input set, measured in the worker."""
        all_metas: list[Any] = []
        blobs: list[bytes] = []
        for inputs in sets:
            metas, b = encode_values(inputs)
            for m in metas:
                if "blob" in m:
                    m["blob"] += len(blobs)
            all_metas.append(metas)
            blobs.extend(b)
        t0 = time.perf_counter()
        reply, rblobs = self.request({"op": "gpu_time", "sets": all_metas}, blobs)
        wall = time.perf_counter() - t0
        samples = reply.get("samples")
        if not isinstance(samples, list) or len(samples) != len(sets):
            raise CandidateError("runtime_error", "the worker returned no timing samples")
        outs = [self._decode(m, rblobs, self.out_device) for m in reply.get("outputs") or []]
        return [float(s) for s in samples], outs, wall

    def _decode(self, metas: Any, blobs: list[bytearray], device: str) -> list[Any]:
        try:
            return decode_values(metas if metas is not None else [], blobs, device)
        except WireError as exc:
            raise CandidateError(
                "runtime_error", f"the candidate's worker sent malformed data: {exc}"
            ) from exc

    def keep_compile_cache(self) -> None:
        """Keep the worker's Triton cache for later evaluations of this exact source (see compile_cache)."""
        if self.cache_key is None or not self.calls_ok:
            return
        try:
            reply, blobs = self.request({"op": "cache_dump"}, [])
        except CandidateError:
            return
        names = reply.get("files")
        if reply.get("op") == "cache" and isinstance(names, list) and len(names) == len(blobs):
            compile_cache.keep(
                self.cache_key, [(str(n), bytes(b)) for n, b in zip(names, blobs, strict=True)]
            )

    def close(self) -> None:
        try:
            self.keep_compile_cache()
        except Exception:  # a cache is an optimisation: never fail an evaluation over it
            pass
        try:
            send_frame(self.worker.sock, {"op": "bye"})
            deadline = time.monotonic() + 1.0  # a worker that obeys exits at once
            while self.worker.returncode() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        except OSError:
            pass
        self.worker.close()
        if self.device is not None:
            self.device.close()


_STATUSES = ("compile_error", "runtime_error", "timeout", "incorrect", "cheat_detected")


def _mutated_inputs(device: MtiaDevice, placed: list[tuple[int, torch.Tensor]]) -> str | None:
    """The evaluator's own check: every input's device bytes are as it placed them."""
    from lowering.backend.launch import same_bytes

    for j, (handle, original) in enumerate(placed):
        now = device.memory.storages.get(handle)
        if now is None:
            continue
        if not same_bytes(now, host_layout(original)[0]):
            return f"candidate modified input {j} in place (the reference does not)"
    return None
