"""Importing a Python file that is not on `sys.path` (kernel files, problems, samples) as a module.

One helper for the chore every loader repeats: a fresh, unique module name; the module registered in
`sys.modules` while it runs and after (Triton and `inspect` read a kernel's source through it); a
syntax error reported with file and line before anything runs; the half-imported module removed
again when its code raises.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["ModuleLoadError", "load_module_from_file", "unique_module_name"]

_counter = itertools.count()


class ModuleLoadError(ImportError):
    """The file is missing, not Python, or raised while it ran; the message names the file."""


def unique_module_name(path: str | Path, prefix: str = "kegen_file") -> str:
    """A module name no other load uses: `prefix`, the file's stem and a counter."""
    stem = re.sub(r"\W", "_", Path(path).stem)
    return f"{prefix}_{stem}_{next(_counter)}"


def load_module_from_file(
    path: str | Path, name: str | None = None, *, register: bool = True, wrap_errors: bool = True
) -> ModuleType:
    """Import `path` as a new module named `name` (default: `unique_module_name(path)`).

    `register`: keep it in `sys.modules` (needed for Triton kernels and dataclasses in the file).
    Raises `ModuleLoadError` naming the file (the original exception chained); with
    `wrap_errors=False` an exception raised by the file's own code (SyntaxError included) propagates
    as it is, for callers that report it with the file's traceback.
    """
    file = Path(path)
    if not file.is_file():
        raise ModuleLoadError(f"no such file: {file}")
    if wrap_errors:
        try:
            ast.parse(file.read_text(), filename=str(file))
        except SyntaxError as exc:
            raise ModuleLoadError(f"{file}:{exc.lineno}: syntax error: {exc.msg}") from exc
        except UnicodeDecodeError as exc:
            raise ModuleLoadError(f"cannot import {file}: not a text file ({exc.reason})") from exc
    name = name or unique_module_name(file)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModuleLoadError(f"cannot import {file}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if wrap_errors and isinstance(exc, Exception):
            raise ModuleLoadError(f"importing {file} failed: {type(exc).__name__}: {exc}") from exc
        raise
    if not register:
        sys.modules.pop(name, None)
    return module
