"""Calling models inside the worker: build them seeded, call them under the guards, and turn every
exception into a CandidateError with a status, a message and the candidate's source line."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from kegen.eval.errors import CandidateError
from kegen.eval.inputs import flatten_outputs
from kegen.eval.loader import source_line_of
from kegen.eval.models import build_model, call_reference  # noqa: F401  (re-exported for the worker)
from kegen.eval.sandboxed.factory_device import factory_device, install_factory_device
from kegen.eval.sandboxed.guards import (
    OpGuard,
    TamperGuard,
    ThreadWatch,
    candidate_frame,
    install_host_access_hooks,
    install_launch_hooks,
)


def _is_compile_failure(exc: BaseException) -> bool:
    if type(exc).__name__ in (
        "CompilationError",
        "CompileTimeAssertionFailure",
        "UnsupportedLanguageConstruct",
    ):
        return True
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if code.co_name == "compile" and code.co_filename.replace("\\", "/").endswith(
            "triton/compiler/compiler.py"
        ):
            return True
    return False


def classify(exc: BaseException, path: Path | None, what: str) -> CandidateError:
    """A CandidateError for an exception raised by the candidate's code."""
    if isinstance(exc, CandidateError):
        return exc
    if type(exc).__name__ == "DeviceDataError":  # mtia: torch compute on device data in the worker
        return CandidateError("cheat_detected", f"{what}: {exc}", source_line_of(exc, path))
    status = "compile_error" if _is_compile_failure(exc) else "runtime_error"
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, MemoryError):
        text += " (the sandbox's memory limit was reached)"
    if len(text) > 1500:
        text = text[:1500] + " ..."
    return CandidateError(status, f"{what}: {type(exc).__name__}: {text}", source_line_of(exc, path))


# Imported before the tamper snapshot, so that a candidate patching them (even one that imports
# them itself) is seen. Pieces not installed here (the simulator on a GPU machine) are skipped.
SNAPSHOT_PREIMPORTS = (
    "torch._dynamo",
    "triton",
    "triton.language",
    "triton.testing",
    "triton.backends",
    "kegen.eval.timing_host",
    "kegen.eval.timing_gpu",
    "kegen.eval.timing_mtia",
    "kegen.eval.sandboxed.gpu_kernels",
    "lowering.backend.driver",
    "lowering.backend.launch",
    "mtia_sim.simulator",
    "mtia_sim.timing",
    "mtia_sim.counters",
    "mtia_sim.report",
)


def _preimport() -> None:
    """Import what legitimate candidates import lazily and that rebinds watched names (torch._dynamo
    wraps torch.manual_seed), so the tamper snapshot is taken after it."""
    import importlib

    for name in SNAPSHOT_PREIMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # optional pieces
            pass


class Guards:
    """The per-call cheat guards of one worker (inactive when check_cheats is off)."""

    def __init__(self, candidate_path: Path, allow_ops: tuple[str, ...], active: bool, gpu: bool) -> None:
        _preimport()
        install_launch_hooks()
        install_host_access_hooks()
        if gpu:
            install_factory_device()
        self.path = candidate_path
        self.allow_ops = allow_ops
        self.active = active
        self.gpu = gpu
        self.threads = ThreadWatch(candidate_path) if active else None
        self.tamper = TamperGuard() if active else None
        self.last_ops: OpGuard | None = None
        self.in_candidate = False
        self.reference_called: str | None = None

    def watch_reference(self, model_cls: type) -> None:
        """Make a call of the reference Model from inside the candidate a detected cheat."""
        if not self.active:
            return
        original = getattr(model_cls, "forward")  # noqa: B009
        guards = self

        def forward(model: Any, *args: Any, **kwargs: Any) -> Any:
            if guards.in_candidate and guards.reference_called is None:
                guards.reference_called = candidate_frame(guards.path) or "?"
            return original(model, *args, **kwargs)

        setattr(model_cls, "forward", forward)  # noqa: B010

    def check_tamper(self) -> None:
        """Raise cheat_detected if timers/checkers were replaced (~40 ms: call at phase ends)."""
        if self.tamper is not None:
            msg = self.tamper.check()
            if msg:
                raise CandidateError("cheat_detected", msg)

    @contextlib.contextmanager
    def ops(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        guard = OpGuard(self.allow_ops, self.path)
        self.last_ops = guard
        with guard:
            yield
        msg = guard.message()
        if msg:
            raise CandidateError("cheat_detected", msg, guard.source_line())

    def call(
        self, model: Any, inputs: list[Any], what: str = "candidate forward", *, watch_ops: bool = True
    ) -> list[torch.Tensor]:
        """Run the candidate once; cheats (ops, reference calls, threads) and failures raise
        CandidateError."""
        self.in_candidate = True
        try:
            with torch.no_grad(), factory_device("cuda" if self.gpu else "cpu"):
                if watch_ops:
                    with self.ops():
                        out = model(*inputs)
                else:
                    out = model(*inputs)
            self._check_reference_call()
            if self.threads is not None:
                msg = self.threads.check_after_call()
                if msg:
                    raise CandidateError("cheat_detected", msg)
            if self.gpu:
                torch.cuda.synchronize()
            flat = flatten_outputs(out)
        except CandidateError:
            self._check_reference_call()
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() in a candidate is its failure
            self._check_reference_call()
            raise classify(exc, self.path, what) from exc
        finally:
            self.in_candidate = False
        return flat

    def _check_reference_call(self) -> None:
        if self.reference_called is not None:
            where = self.reference_called if self.reference_called != "?" else None
            raise CandidateError(
                "cheat_detected",
                "candidate called the PyTorch reference (the problem's Model.forward) instead of computing",
                where,
            )
