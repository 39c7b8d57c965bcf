"""Compile a candidate's kernels for a GPU on a host without one: every launch its forward makes, at the
problem's own shapes, through Triton's own NVIDIA pipeline (TTIR -> TTGIR -> LLVM -> PTX -> cubin with
the ptxas Triton ships), without running anything.

Triton's interpreter (TRITON_INTERPRET=1) runs a GPU candidate's numerics on the CPU but never compiles
it: a drafted cumsum that was exact there failed to compile on an H100 (a pass of the NVIDIA pipeline
rejected its loop, 2026-12-07). Here a child process started with TRITON_INTERPRET=1 (it must be on
before Triton is first imported) runs the forward with every launch replaced by a record of the kernel,
its argument types, constexprs and options (nothing is computed); this process then compiles each
distinct launch for `GPUTarget("cuda", 90, 32)`. `python -m kegen.bench.gpu_compile PROBLEM CANDIDATE`
prints one JSON line per kernel and exits non-zero when one fails to compile. `kegen lower --target
nvidia` compiles one kernel for a signature written by hand; this finds the signatures itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

_DTYPES = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "i1",
}
_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


@dataclass
class Compiled:
    """One kernel compiled (or not) for the GPU target."""

    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, Any]
    error: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "kernel": self.kernel,
                "ok": not self.error,
                "signature": self.signature,
                "constexprs": {k: _encode(v) for k, v in self.constexprs.items()},
                "options": self.options,
                "error": self.error[-1500:],
            }
        )


def _encode(value: Any) -> Any:
    """A constexpr as JSON: numbers, strings, booleans and None as they are, a Triton dtype by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)  # tl.float16 and friends
    if isinstance(name, str):
        return {"tl_dtype": name}
    raise TypeError(f"constexpr {value!r} ({type(value).__name__}) cannot be recorded")


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "tl_dtype" in value:
        import triton.language as tl

        return (
            getattr(tl, value["tl_dtype"]) if hasattr(tl, value["tl_dtype"]) else tl.dtype(value["tl_dtype"])
        )
    return value


def _arg_type(value: Any) -> str | None:
    """Triton's signature type of a runtime argument; None for one passed as a constant (None)."""
    if isinstance(value, torch.Tensor):
        return "*" + _DTYPES[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    return None


class LaunchRecorder:
    """Replaces the interpreter's launches by a record of each distinct one (kernel, argument types,
    constexprs, options) while installed; nothing runs."""

    def __init__(self) -> None:
        self.launches: list[Compiled] = []
        self._seen: set[str] = set()

    def install(self) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        recorder = self

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
            recorder.record(fn, args, kwargs)

        InterpretedFunction.run = run  # type: ignore[method-assign]

    def record(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        options = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs}
        params = inspect.signature(fn.fn).parameters
        constexpr_params = {n for n, p in params.items() if "constexpr" in str(p.annotation)}
        bound = dict(zip(params, args, strict=False))
        bound.update(kwargs)
        signature: dict[str, str] = {}
        constexprs: dict[str, Any] = {}
        for name, p in params.items():
            value = bound.get(name, p.default)
            kind = None if name in constexpr_params else _arg_type(value)
            if kind is None:
                signature[name] = "constexpr"
                constexprs[name] = value.value if hasattr(value, "value") else value
            else:
                signature[name] = kind
        launch = Compiled(fn.fn.__name__, signature, constexprs, options)
        key = launch.to_json()
        if key not in self._seen:
            self._seen.add(key)
            self.launches.append(launch)


@contextlib.contextmanager
def tensors_report_cuda() -> Iterator[None]:
    """Every tensor answers `is_cuda` with True while open: a forward that picks its kernel by device
    (the grouped convolution's launch takes a weight-stationary kernel on mtia, the row kernel on a GPU)
    then launches the kernels a GPU runs, though its tensors are on the host."""
    saved = torch.Tensor.__dict__.get("is_cuda")
    torch.Tensor.is_cuda = property(lambda self: True)  # type: ignore[assignment,method-assign]
    try:
        yield
    finally:
        if saved is None:
            del torch.Tensor.is_cuda
        else:
            torch.Tensor.is_cuda = saved  # type: ignore[method-assign]


def record_launches(problem: Path, candidate: Path) -> list[Compiled]:
    """The distinct launches of `candidate`'s forward on the problem's inputs, taking the paths a GPU
    takes (`tensors_report_cuda`; call in a process started with TRITON_INTERPRET=1)."""
    recorder = LaunchRecorder()
    recorder.install()
    prob = _module(problem, "problem")
    cand = _module(candidate, "candidate")
    torch.manual_seed(0)
    model = cand.ModelNew(*prob.get_init_inputs()).eval()
    with torch.no_grad(), tensors_report_cuda():
        model(*prob.get_inputs())
    return recorder.launches


def compile_launch(candidate: ModuleType, launch: Compiled, arch: int = 90) -> Compiled:
    """`launch`'s kernel of the (normally imported) candidate module compiled for sm_`arch`; the failure,
    if any, in its `error`."""
    import triton
    from triton.backends.compiler import GPUTarget

    try:
        fn = getattr(candidate, launch.kernel)
        consts = {(fn.arg_names.index(k),): v for k, v in launch.constexprs.items()}
        source = triton.compiler.ASTSource(fn=fn, signature=launch.signature, constexprs=consts)
        triton.compile(source, target=GPUTarget("cuda", arch, 32), options=dict(launch.options))
    except Exception as exc:  # the failure is the finding
        launch.error = f"{type(exc).__name__}: {exc}"
    return launch


def compile_candidate(problem: Path, candidate: Path, arch: int = 90, timeout: float = 600) -> list[Compiled]:
    """Every distinct kernel launch of `candidate`'s forward at the problem's shapes, compiled for
    sm_`arch`: the launches are recorded in Triton's interpreter (a child process), then compiled here."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    got = subprocess.run(
        [sys.executable, "-m", "kegen.bench.gpu_compile", "--record", str(problem), str(candidate)],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if got.returncode != 0:
        raise RuntimeError(f"recording the launches of {candidate} failed:\n{got.stderr[-3000:]}")
    module = _module(candidate, f"kegen_gpu_compile_{abs(hash(str(candidate)))}")
    launches = []
    for line in got.stdout.splitlines():
        data = json.loads(line)
        data.pop("ok")
        data["constexprs"] = {k: _decode(v) for k, v in data["constexprs"].items()}
        launches.append(Compiled(**data))
    return [compile_launch(module, launch, arch) for launch in launches]


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "--record":  # the child: TRITON_INTERPRET=1
        for launch in record_launches(Path(args[1]), Path(args[2])):
            print(launch.to_json())
        return 0
    if len(args) != 2:
        print("usage: python -m kegen.bench.gpu_compile PROBLEM CANDIDATE", file=sys.stderr)
        return 2
    results = compile_candidate(Path(args[0]), Path(args[1]))
    for r in results:
        print(r.to_json())
    if not results:
        print("no kernel was launched", file=sys.stderr)
        return 1
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
