"""Kernel launches in a candidate's source and the backend's launch options read from them.

The lowest layer of the source rewrites: knobs, blocks and plans read launches through it.
"""

from __future__ import annotations

import ast
from typing import Any

DEFAULT_OPTION_SPACE: dict[str, tuple[Any, ...]] = {
    "num_stages": (1, 2, 3),
    "pe_mapping": ("blocked", "round_robin"),
    "dual_core": (False, True),
}
OPTION_DEFAULTS: dict[str, Any] = {"num_stages": 1, "pe_mapping": "round_robin", "dual_core": False}


def option_space() -> dict[str, tuple[Any, ...]]:
    """The mtia backend's performance options and values (`lowering.pipeline.search_space()`)."""
    try:
        from lowering.pipeline import search_space

        return dict(search_space())
    except Exception:  # the backend may be absent (other targets)
        return dict(DEFAULT_OPTION_SPACE)


def option_defaults() -> dict[str, Any]:
    """The backend's default value of each performance option (what a launch without it gets)."""
    try:
        from lowering.options import MtiaOptions
        from lowering.pipeline import search_space

        defaults = MtiaOptions()
        return {name: getattr(defaults, name) for name in search_space()}
    except Exception:  # the backend may be absent (other targets)
        return dict(OPTION_DEFAULTS)


def launch_name(call: ast.Call) -> str | None:
    """The kernel a `kernel[grid](...)` call launches (None for other calls)."""
    f = call.func
    if isinstance(f, ast.Subscript):
        v = f.value
        if isinstance(v, ast.Name):
            return v.id
        if isinstance(v, ast.Attribute):
            return v.attr
    return None


def launches(tree: ast.AST) -> list[tuple[str, int, ast.Call]]:
    """Every kernel launch under `tree`: (kernel, how many launches of it came before, the call)."""
    counts: dict[str, int] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = launch_name(node)
            if name is not None:
                out.append((name, counts.get(name, 0), node))
                counts[name] = counts.get(name, 0) + 1
    return out


def launch_options_of(source: str) -> dict[str, dict[str, Any]]:
    """kernel name -> launch options set in the source (to carry them over a recipe rewrite)."""
    out: dict[str, dict[str, Any]] = {}
    space = option_space()
    for name, _, call in launches(ast.parse(source)):
        for kw in call.keywords:
            if kw.arg in space and isinstance(kw.value, ast.Constant):
                out.setdefault(name, {})[kw.arg] = kw.value.value
    return out
