"""Kernel sources of Inductor's output: the Triton kernels, their launch configs and helpers.

Inductor writes each kernel as `name = async_compile.triton('name', '''<module source>''')`; the
module source holds a `@triton_heuristics.<kind>(...)` decorator (size hints, candidate configs, grid
type) over the `@triton.jit` function. `InductorKernel` keeps the jit function's text, its runtime
signature and Inductor's candidate configs; `choose_config` picks one for the simulated MTIA.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kegen.inductor import helpers as mtia_helpers
from kegen.inductor.capture import CaptureError

# programs the chip runs at once (8x8 PEs) and the most elements one program's tile should hold
PARALLEL_PROGRAMS = 64
MAX_TILE_ELEMENTS = 4096
_HELPER_REF = re.compile(r"\btriton_helpers\.(\w+)")
_GRIDS = {"Grid1D": ("x",), "Grid2D": ("x", "y"), "Grid3D": ("x", "y", "z")}


@dataclass
class InductorKernel:
    """One Triton kernel of Inductor's output."""

    name: str
    source: str  # the @triton.jit function, helpers referenced by bare name
    params: list[str]  # every parameter in order; Inductor's launches pass a prefix of them
    constexprs: list[str]
    configs: list[dict[str, int]]
    grid_type: str
    size_hints: dict[str, int] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)

    def launch_grid(self, numels: dict[str, int], cfg: dict[str, int]) -> list[str]:
        """The grid's elements as source text (`triton.cdiv(N, BLOCK)` or `N`)."""
        if self.grid_type not in _GRIDS:
            raise CaptureError(f"kernel {self.name}: Inductor grid type {self.grid_type} is not supported")
        dims = []
        for axis in _GRIDS[self.grid_type]:
            n = numels.get(f"{axis}numel", 1)
            block = cfg.get(f"{axis.upper()}BLOCK")
            dims.append(str(n) if block in (None, 1) else f"triton.cdiv({n}, {block})")
        return dims


def parse_kernel(name: str, module_source: str) -> InductorKernel:
    """The kernel `name` of one `async_compile.triton` module source."""
    from torch._inductor.codecache import PyCodeCache

    try:  # Inductor's own loader (Triton needs the kernel in a file); nothing is compiled here
        tuner = getattr(PyCodeCache.load(module_source), name, None)
    except Exception as exc:
        raise CaptureError(
            f"kernel {name}: Inductor's kernel module does not load ({type(exc).__name__}: {exc})"
        ) from exc
    signature: dict[str, str] = dict(getattr(tuner, "triton_meta", {}).get("signature", {}))
    if not signature:
        raise CaptureError(
            f"kernel {name}: Inductor's kernel has no signature (is it a template or user kernel?)"
        )
    body = _jit_functions(name, module_source)
    helpers = set(_HELPER_REF.findall(body))
    configs = [dict(c.kwargs) for c in getattr(tuner, "configs", [])] or [{}]
    meta = getattr(tuner, "inductor_meta", {}) or {}
    return InductorKernel(
        name=name,
        source=_HELPER_REF.sub(r"\1", body).rstrip() + "\n",
        params=list(signature),
        constexprs=[p for p, ty in signature.items() if ty == "constexpr"],
        configs=configs,
        grid_type=str(meta.get("grid_type", "Grid1D")),
        size_hints=dict(getattr(tuner, "size_hints", None) or {}),
        helpers=helpers,
    )


def _jit_functions(name: str, module_source: str) -> str:
    """The module's Triton functions (the kernel and any combine functions it defines) with only their
    `@triton.jit` decorator (Inductor's `@triton_heuristics.*` one is dropped)."""
    tree = ast.parse(module_source)
    lines = module_source.splitlines()
    parts = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            first = node.lineno - 1  # the `def` line (decorators start above it)
            text = "\n".join(lines[first : node.end_lineno])
            parts.append("@triton.jit\n" + text)
    if not any(f"def {name}(" in p for p in parts):
        raise CaptureError(f"kernel {name}: no @triton.jit function of that name in Inductor's output")
    return "\n\n\n".join(parts)


def choose_config(kernel: InductorKernel, numels: dict[str, int]) -> dict[str, int]:
    """Inductor's candidate config that suits the chip: tiles within MAX_TILE_ELEMENTS, as few waves of
    PARALLEL_PROGRAMS programs as possible, then as many programs as the chip runs at once, then
    the largest tiles."""

    def score(cfg: dict[str, int]) -> tuple[int, int, int, int]:
        programs = math.prod(
            math.ceil(numels.get(f"{a}numel", 1) / max(cfg.get(f"{a.upper()}BLOCK", 1), 1)) for a in "xyz"
        )
        r_tile = max(cfg.get("R0_BLOCK", 0), _persistent_r(kernel, numels))
        tile = math.prod(cfg.get(f"{a}BLOCK", 1) for a in "XYZ") * max(r_tile, 1)
        too_big = max(tile - MAX_TILE_ELEMENTS, 0)
        waves = math.ceil(programs / PARALLEL_PROGRAMS)
        return (too_big, waves, -min(programs, PARALLEL_PROGRAMS), -tile)

    return min(kernel.configs, key=score)


def _persistent_r(kernel: InductorKernel, numels: dict[str, int]) -> int:
    """The reduction tile a persistent reduction fixes inside the kernel (next power of two)."""
    if "R0_BLOCK" in kernel.constexprs or "r0_numel" not in numels:
        return 0
    return 1 << max(int(numels["r0_numel"]) - 1, 0).bit_length()


def helper_sources(names: set[str]) -> list[str]:
    """Sources of the Inductor helpers the kernels call (and those they call), kegen's MTIA versions
    for OVERRIDES; the first entry imports the Triton constexpr functions they use (e.g. `_log2`).
    Raises CaptureError for a helper or a global the candidate cannot reproduce."""
    from torch._inductor.runtime import triton_helpers

    done: dict[str, str] = {}
    imports: set[str] = set()
    todo = sorted(names - {"set_driver_to_cpu"})
    while todo:
        name = todo.pop()
        if name in done:
            continue
        module: Any = mtia_helpers if name in mtia_helpers.OVERRIDES else triton_helpers
        src_fn = getattr(getattr(module, name, None), "fn", None)
        if src_fn is None:
            raise CaptureError(
                f"Inductor helper triton_helpers.{name} is not a Triton function the drafter can copy"
            )
        # `math` in Inductor's helpers is triton.language.math (the candidate's `tl_math`)
        src = re.sub(r"(?<![\w.])math\.", "tl_math.", _strip_docstring(inspect.getsource(src_fn)))
        done[name] = src
        for ref in set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b", src)) - {
            name,
            "tl",
            "triton",
            "tl_math",
            "libdevice",
        }:
            obj = getattr(module, ref, None)
            if obj is None or ref in done or isinstance(obj, ModuleType):
                continue
            if _is_jit(obj):
                todo.append(ref)
            elif callable(obj) and str(getattr(obj, "__module__", "")).startswith("triton."):
                imports.add(f"from {obj.__module__} import {ref}")
            elif isinstance(obj, int | float | bool) or type(obj).__name__ == "constexpr":
                imports.add(f"{ref} = tl.constexpr({getattr(obj, 'value', obj)!r})")
    header = ["\n".join(sorted(imports)) + "\n"] if imports else []
    return header + [done[n] for n in _dependency_order(done)]


def _is_jit(obj: Any) -> bool:
    return obj is not None and hasattr(obj, "fn") and hasattr(obj, "run")


def _strip_docstring(src: str) -> str:
    tree = ast.parse(src)
    fn = tree.body[0]
    if isinstance(fn, ast.FunctionDef) and fn.body and isinstance(fn.body[0], ast.Expr):
        if isinstance(fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str):
            lines = src.splitlines()
            doc = fn.body[0]
            del lines[doc.lineno - 1 : (doc.end_lineno or doc.lineno)]
            src = "\n".join(lines) + "\n"
    return re.sub(r"\s+# type: ignore\[[^\]]*\]", "", src)


def _dependency_order(sources: dict[str, str]) -> list[str]:
    """Helpers ordered so that each comes after the helpers it calls."""
    order: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in order or name in stack:
            return
        for other in sources:
            if other != name and re.search(rf"\b{other}\b", sources[name]):
                visit(other, (*stack, name))
        order.append(name)

    for n in sorted(sources):
        visit(n, ())
    return order
