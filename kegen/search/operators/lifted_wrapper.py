"""Moves on a kernel group's draft see the drafted module, not the views around it.

A draft of a `kegen tune` group whose aten graph was lifted (`drafting.aten.wrap`) is the template's
module with its `ModelNew` renamed `_ModelNewLifted`, and a `ModelNew` subclass whose forward applies
the input and output views the lift moved out. Whole-module rewrites (a convolution as row tiles,
the GPU rewrites) rebuild `ModelNew` from the seed's `__init__` and their own forward, so on the
wrapped source they found no `__init__` or dropped the views. `split` gives them the drafted module
as a plain candidate and `rejoin` puts the same wrapper back around what they return.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kegen.search.operators.mutations import Mutation

BASE = "_ModelNewLifted"  # the drafted class's name inside the wrapper (`drafting.aten.wrap` writes it)
_WRAPPER = re.compile(r"\n+class ModelNew\(" + BASE + r"\):\n.*\Z", re.S)


def split(source: str) -> tuple[str, str] | None:
    """(the drafted module with its class named ModelNew again, the wrapper's text), or None where
    `source` carries no lift wrapper."""
    m = _WRAPPER.search(source)
    if m is None or f"class {BASE}(" not in source[: m.start()]:
        return None
    return source[: m.start()].replace(f"class {BASE}(", "class ModelNew(", 1) + "\n", m.group(0)


def rejoin(module: str, wrapper: str) -> str:
    """`module` (a candidate with one ModelNew) inside `wrapper` again."""
    renamed = module.replace("class ModelNew(", f"class {BASE}(", 1)
    return renamed.rstrip("\n") + "\n\n\n" + wrapper.lstrip("\n")


def rewrapped(m: Mutation, wrapper: str) -> Mutation:
    """`m` applied to a wrapped source: to the module inside, the wrapper kept."""

    def apply(source: str) -> str:
        parts = split(source)
        return rejoin(m.apply(parts[0] if parts else source), wrapper)

    return dataclasses.replace(m, apply=apply)
