"""Load a KernelBench-style problem file and a candidate file as modules, with errors that say which.

Problem: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`, optional module-level size
constants and an optional `EDGE_SIZES = [{"N": 1000}, ...]` (overrides of those constants under
which the model must also work). Candidate: `class ModelNew(nn.Module)` with Model's constructor,
or a module-level launch wrapper `forward(*inputs)` (for models without parameters).
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kegen.eval.errors import CandidateError, ProblemError
from kegen.modules import load_module_from_file, unique_module_name


@dataclass
class Problem:
    """A loaded problem file."""

    path: Path
    module: ModuleType
    model_cls: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]
    size_constants: dict[str, int] = field(default_factory=dict)
    edge_sizes: list[dict[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem


def _exec_module(path: Path, prefix: str) -> ModuleType:
    """Import `path` as a fresh module (registered in sys.modules so Triton/inspect find its source);
    the file's own exceptions (SyntaxError with file and line included) propagate unchanged."""
    return load_module_from_file(path, unique_module_name(path, prefix), wrap_errors=False)


def load_problem(path: str | Path) -> Problem:
    """Load and validate a problem file; raise ProblemError naming what is wrong."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ProblemError(f"problem file {path} does not exist")
    try:
        module = _exec_module(path, "kegen_problem")
    except SyntaxError as exc:
        raise ProblemError(f"problem file {path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        raise ProblemError(f"problem file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ProblemError(
            f"problem file {path} lacks {', '.join(missing)}: a KernelBench problem defines "
            "class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    if not inspect.isclass(module.Model):
        raise ProblemError(f"problem file {path}: Model must be a class (an nn.Module)")
    sizes = {
        k: v
        for k, v in vars(module).items()
        if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)
    }
    edges = getattr(module, "EDGE_SIZES", [])
    if not isinstance(edges, list) or not all(isinstance(e, dict) for e in edges):
        raise ProblemError(f"problem file {path}: EDGE_SIZES must be a list of dicts of size constants")
    return Problem(
        path=path,
        module=module,
        model_cls=module.Model,
        get_inputs=module.get_inputs,
        get_init_inputs=module.get_init_inputs,
        size_constants=sizes,
        edge_sizes=edges,
    )


def load_candidate(path: str | Path) -> type:
    """Load a candidate file and return its model class; raise CandidateError(compile_error) if malformed."""
    path = Path(path).resolve()
    try:
        module = _exec_module(path, "kegen_candidate")
    except SyntaxError as exc:
        raise CandidateError(
            "compile_error", f"syntax error in candidate: {exc.msg}", f"{path.name}:{exc.lineno}"
        ) from exc
    except Exception as exc:
        raise CandidateError(
            "compile_error",
            f"candidate failed to import: {type(exc).__name__}: {exc}",
            source_line_of(exc, path),
        ) from exc
    cls = getattr(module, "ModelNew", None)
    if cls is not None:
        if not inspect.isclass(cls):
            raise CandidateError("compile_error", "ModelNew in the candidate is not a class")
        return cls
    wrapper = getattr(module, "forward", None)
    if callable(wrapper):
        return _wrap_launcher(wrapper)
    raise CandidateError(
        "compile_error",
        "candidate defines neither class ModelNew(nn.Module) nor a "
        "launch wrapper `forward(*inputs)`; define ModelNew with the reference's constructor",
    )


def _wrap_launcher(fn: Callable[..., Any]) -> type:
    import torch

    class WrappedLauncher(torch.nn.Module):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def forward(self, *inputs: Any) -> Any:
            return fn(*inputs)

    return WrappedLauncher


def check_constructor(cls: type, init_inputs: list[Any]) -> None:
    """Raise CandidateError if `cls(*init_inputs)` cannot bind (a wrong constructor signature)."""
    try:
        inspect.signature(cls).bind(*init_inputs)
    except TypeError as exc:
        raise CandidateError(
            "compile_error",
            f"ModelNew's constructor does not take the reference's "
            f"init inputs ({len(init_inputs)} positional): {exc}",
        ) from exc
    except ValueError:
        pass  # no signature available (builtins): let the call decide


def source_line_of(exc: BaseException, path: Path | None) -> str | None:
    """file:line of the innermost frame of `exc` in the candidate file (or a Triton kernel's line)."""
    kernel_line = _triton_compile_line(exc)
    if kernel_line:
        return kernel_line
    if path is None:
        return None
    # The innermost candidate frame, preferring the exception that started it all (the interpreter
    # and Triton re-raise errors from inside the kernel as new exceptions).
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in reversed(chain):
        found: str | None = None
        for frame, lineno in traceback.walk_tb(e.__traceback__):
            if Path(frame.f_code.co_filename).resolve() == path.resolve():
                found = f"{path.name}:{lineno}"
        if found is None and isinstance(e, SyntaxError) and e.filename and Path(e.filename) == path:
            found = f"{path.name}:{e.lineno}"
        if found is not None:
            return found
    return None


def _triton_compile_line(exc: BaseException) -> str | None:
    """For triton CompilationError: map the kernel-relative line to the file line."""
    node = getattr(exc, "node", None)
    if node is None or not hasattr(node, "lineno") or not hasattr(exc, "src"):
        return None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        owner = frame.f_locals.get("self")
        start = getattr(owner, "starting_line_number", None)
        fn = getattr(owner, "fn", None)
        if start is not None and fn is not None:
            try:
                file = Path(inspect.getsourcefile(fn) or "?").name
            except TypeError:
                continue
            raw_src = getattr(owner, "raw_src", "") or ""
            raw = list(raw_src) if isinstance(raw_src, list | tuple) else str(raw_src).splitlines()
            decorators = next(
                (i for i, ln in enumerate(raw) if ln.lstrip().startswith(("def ", "async def "))), 0
            )
            return f"{file}:{start + decorators + node.lineno - 1}"
    return None
