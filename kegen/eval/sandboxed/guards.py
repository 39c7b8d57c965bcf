"""Anti-cheat diagnostics run around every call of a candidate inside the worker (W).

Each check returns a message (a cheat was seen) or None. The worker turns a message into
Status.CHEAT_DETECTED. Layers: what the candidate computes with (OpGuard), what it leaves behind
(threads, side streams, mutated inputs, patched timers/numerics), what it returns (aliases of
inputs or of the reference's outputs, cached results, lowered precision) and how fast it claims
to be (below the roofline).
"""

from __future__ import annotations

import sys
import threading
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops a candidate's forward may always call: allocation, views, copies, metadata.
ALWAYS_ALLOWED_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "empty_permuted",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_empty",
        "new_empty_strided",
        "new_zeros",
        "new_ones",
        "new_full",
        "arange",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "flatten",
        "unflatten",
        "slice",
        "select",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "alias",
        "detach",
        "clone",
        "contiguous",
        "copy_",
        "_to_copy",
        "to",
        "fill_",
        "zero_",
        "cat",
        "stack",
        "_local_scalar_dense",
        "resize_",
        "is_same_size",
        "set_",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "_reshape_alias",
        "view_as",
        "item",
        "is_nonzero",
        "equal",
        "_has_compatible_shallow_copy_type",
        "record_stream",
    }
)


class OpGuard(TorchDispatchMode):
    """Records every torch (aten) op the candidate's forward computes with outside Triton launches.

    Ops inside a Triton launch (the interpreter and the mtia driver move tensors with torch) are
    exempt: `launch_depth` is raised by the hooks `install_launch_hooks` puts on Triton's runtime.
    """

    launch_depth = 0
    launches = 0  # top-level Triton launches seen by the hooks
    launched_kernels: set[str] = set()  # names of the @triton.jit functions launched
    current: OpGuard | None = None  # the guard of the forward in progress (for the host-copy hooks)

    def __init__(self, allow_ops: tuple[str, ...], candidate_path: Path | None) -> None:
        super().__init__()
        self.allow_all = "*" in allow_ops
        self.allowed = {op.removeprefix("aten.").split(".")[0] for op in allow_ops}
        self.candidate_path = candidate_path
        self.violations: list[tuple[str, str | None]] = []

    def __enter__(self) -> OpGuard:
        OpGuard.current = self
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        OpGuard.current = None
        super().__exit__(*exc)

    def note_host_access(self, what: str) -> None:
        """Tensor data pulled to the host (numpy) outside a launch: host computation, not a kernel."""
        if OpGuard.launch_depth == 0 and not self.allow_all and what not in self.allowed:
            self.violations.append((what, candidate_frame(self.candidate_path)))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if (
            OpGuard.launch_depth == 0
            and not self.allow_all
            and name not in ALWAYS_ALLOWED_OPS
            and name not in self.allowed
        ):
            self.violations.append((f"aten.{name}", candidate_frame(self.candidate_path)))
        return func(*args, **(kwargs or {}))

    def message(self) -> str | None:
        if not self.violations:
            return None
        ops = sorted({v[0] for v in self.violations})
        host = [op for op in ops if op.startswith("Tensor.")]
        if host:
            return (
                f"candidate pulled tensor data to the host ({', '.join(host)}) in forward: computing on the "
                "host instead of in kernels (allow with EvalConfig.allow_ops / --allow-op)"
            )
        return (
            f"candidate computed with torch op(s) {', '.join(ops)} instead of a kernel; a candidate "
            "must compute in Triton kernels (allow ops with EvalConfig.allow_ops / --allow-op)"
        )

    def source_line(self) -> str | None:
        return next((v[1] for v in self.violations if v[1]), None)


def install_host_access_hooks() -> None:
    """Make Tensor.numpy() / tolist() (and so np.asarray(tensor)) visible to the active OpGuard."""
    for attr in ("numpy", "tolist"):
        original = getattr(torch.Tensor, attr)
        if getattr(original, "_kegen_hook", False):
            continue

        def hooked(self: Any, *args: Any, __orig: Any = original, __name: str = attr, **kwargs: Any) -> Any:
            guard = OpGuard.current
            if guard is not None:
                guard.note_host_access(f"Tensor.{__name}")
            return __orig(self, *args, **kwargs)

        hooked._kegen_hook = True  # type: ignore[attr-defined]
        setattr(torch.Tensor, attr, hooked)


def candidate_frame(path: Path | None) -> str | None:
    """file:line of the innermost frame of the current stack in the candidate's file."""
    if path is None:
        return None
    for frame in reversed(traceback.extract_stack()):
        if frame.filename == str(path):
            return f"{path.name}:{frame.lineno}"
    return None


def install_launch_hooks() -> None:
    """Wrap Triton's launch entry points so OpGuard knows when a kernel launch is in progress."""
    from triton.runtime import jit

    targets: list[tuple[Any, str]] = [(jit.JITFunction, "run")]
    try:
        from triton.runtime import interpreter

        targets.append((interpreter.InterpretedFunction, "run"))
    except ImportError:  # pragma: no cover
        pass
    for cls, attr in targets:
        original = getattr(cls, attr)
        if getattr(original, "_kegen_hook", False):
            continue

        def hooked(self: Any, *args: Any, __orig: Callable[..., Any] = original, **kwargs: Any) -> Any:
            if OpGuard.launch_depth == 0:
                OpGuard.launches += 1
            name = getattr(getattr(self, "fn", None), "__name__", None)
            if name:
                OpGuard.launched_kernels.add(name)
            OpGuard.launch_depth += 1
            try:
                return __orig(self, *args, **kwargs)
            finally:
                OpGuard.launch_depth -= 1

        hooked._kegen_hook = True  # type: ignore[attr-defined]
        setattr(cls, attr, hooked)


# --- tampering with timers, checkers and numerics settings ------------------------------------------

_WATCHED_MODULE_PREFIXES = (
    "time",
    "torch",
    "torch.nn.functional",
    "torch.cuda",
    "torch.testing",
    "triton.testing",
    "triton.runtime.jit",
    "threading",
    "kegen.eval",
    "lowering.backend",
    "mtia_sim",
)


class TamperGuard:
    """Snapshots the identity of timer, checker and simulator functions; reports any that change."""

    def __init__(self) -> None:
        self.snapshot = self._take()
        self.numerics = _numerics_flags()

    def _take(self) -> dict[str, int]:
        snap: dict[str, int] = {}
        for name, module in list(sys.modules.items()):
            if module is None or not _watched(name):
                continue
            for attr, value in list(vars(module).items()):
                if callable(value) or isinstance(value, types.ModuleType):
                    snap[f"{name}.{attr}"] = id(value)
                if isinstance(value, type) and (value.__module__ or "").startswith(_watched_roots()):
                    for meth, fn in list(vars(value).items()):
                        if callable(fn) or isinstance(fn, property | staticmethod | classmethod):
                            snap[f"{name}.{attr}.{meth}"] = id(fn)
        for meth, fn in vars(torch.Tensor).items():
            if callable(fn):
                snap[f"torch.Tensor.{meth}"] = id(fn)
        return snap

    def check(self) -> str | None:
        now = self._take()
        changed = sorted(k for k, v in self.snapshot.items() if k in now and now[k] != v)
        removed = sorted(k for k in self.snapshot if k not in now and not _lazily_loaded(k))
        if changed or removed:
            names = (changed + removed)[:6]
            return (
                "candidate replaced timing/checking functions ("
                + ", ".join(names)
                + "): monkey-patching timers or the evaluator is not allowed"
            )
        numerics = _numerics_flags()
        if numerics != self.numerics:
            diff = {k: (self.numerics[k], numerics[k]) for k in numerics if numerics[k] != self.numerics[k]}
            return (
                f"candidate changed global numerics settings {diff}, "
                "which would lower the reference's precision"
            )
        return None


def _watched(module_name: str) -> bool:
    return any(
        module_name == p
        or (p in ("kegen.eval", "lowering.backend", "mtia_sim") and module_name.startswith(p + "."))
        for p in _WATCHED_MODULE_PREFIXES
    )


def _watched_roots() -> tuple[str, ...]:
    return ("time", "torch.cuda", "triton.testing", "triton.runtime", "kegen.eval", "lowering", "mtia_sim")


def _lazily_loaded(key: str) -> bool:
    return False


def _numerics_flags() -> dict[str, Any]:
    flags: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    try:
        flags["cuda_matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        flags["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
        flags["fp16_reduced_reduction"] = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        flags["bf16_reduced_reduction"] = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    except AttributeError:  # pragma: no cover
        pass
    return flags


# --- threads and side streams --------------------------------------------------------------------


class _ThreadOps(TorchDispatchMode):
    """The op guard's eyes on a thread started inside forward (dispatch modes are per thread)."""

    def __init__(self, guard: OpGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        g = self.guard
        if (
            OpGuard.launch_depth == 0
            and not g.allow_all
            and name not in ALWAYS_ALLOWED_OPS
            and name not in g.allowed
        ):
            g.violations.append((f"aten.{name} (on a thread)", candidate_frame(g.candidate_path)))
        return func(*args, **(kwargs or {}))


def _watch_thread_ops(thread: threading.Thread, guard: OpGuard) -> None:
    original = thread.run

    def run() -> None:
        with _ThreadOps(guard):
            original()

    thread.run = run  # type: ignore[method-assign]


class ThreadWatch:
    """Records threads (and CUDA streams) the candidate's code creates; reports those still busy."""

    def __init__(self, candidate_path: Path | None) -> None:
        self.candidate_path = candidate_path
        self.threads: list[threading.Thread] = []
        self.streams: list[Any] = []
        self._orig_start = threading.Thread.start
        watch = self

        def start(thread: threading.Thread) -> None:
            if candidate_frame(watch.candidate_path):
                watch.threads.append(thread)
            guard = OpGuard.current
            if guard is not None:  # started inside forward: its torch ops are watched too
                _watch_thread_ops(thread, guard)
            watch._orig_start(thread)

        threading.Thread.start = start  # type: ignore[method-assign, assignment]
        if torch.cuda.is_available():
            orig_new = torch.cuda.Stream.__new__

            def stream_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
                stream = orig_new(cls, *args, **kwargs)
                if candidate_frame(watch.candidate_path):
                    watch.streams.append(stream)
                return stream

            torch.cuda.Stream.__new__ = staticmethod(stream_new)  # type: ignore[assignment, method-assign]

    def check_after_call(self) -> str | None:
        alive = [t for t in self.threads if t.is_alive()]
        if alive:
            return (
                f"candidate left {len(alive)} thread(s) running after forward returned "
                f"({alive[0].name}): work off the calling thread escapes timing"
            )
        for stream in self.streams:
            if not stream.query():
                return (
                    "candidate left work pending on a side CUDA stream after forward returned: "
                    "work off the current stream escapes timing"
                )
        return None


def check_mutation(pristine: list[Any], after: list[Any], ref_mutates: set[int]) -> str | None:
    """Inputs must be unchanged after the call, unless the reference changes that input too."""
    for j, (p, a) in enumerate(zip(pristine, after, strict=True)):
        if not isinstance(p, torch.Tensor) or j in ref_mutates:
            continue
        if p.shape != a.shape or not torch.equal(p.nan_to_num(), a.detach().nan_to_num()):
            return f"candidate modified input {j} in place (the reference does not)"
    return None


def mutated_inputs(pristine: list[Any], after: list[Any]) -> set[int]:
    return {
        j
        for j, (p, a) in enumerate(zip(pristine, after, strict=True))
        if isinstance(p, torch.Tensor) and not torch.equal(p.nan_to_num(), a.detach().nan_to_num())
    }
